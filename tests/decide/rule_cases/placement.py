"""Where the JPEG decode runs: cases for advisor/decide/rules/placement.py (DEC-1).

The default trial decodes a 150 KB JPEG in 4 ms of CPU; `output_bytes` is its decoded size
(1.5 MB: 0.5 Mpixel RGB). Without a GPU measured in the trial, DEC-1 takes the figures recorded
on an H100 (advisor/measure/hardware/gpu_decode_recorded.py)."""

from tests.decide.rule_cases import Case

JPEG = {"fmt": "jpeg", "spo": None, "size": 150_000, "count": 50_000}
DECODED = {"output_bytes": 1.5e6}

CASES: list[Case] = [
    # the CPU decode reaches the 1,000/s consumer: nothing to move
    ("DEC-1", {"profile": JPEG, "trial": DECODED}, True, "cpu"),
    # a fast GPU: 16 cores decode about 3,750/s, the recorded H100 decodes ~10,000 0.5-Mpixel
    # images a second in the loop
    ("DEC-1", {"profile": JPEG, "trial": DECODED, "workload": {"consumer_rate": 1e5}}, True, "gpu"),
    # this machine's GPU measured slow (500 images/s): the CPU stays the place
    (
        "DEC-1",
        {
            "profile": {**JPEG, "uri": "/data/train"},
            "trial": {**DECODED, "gpu_images_per_s": 500.0},
            "workload": {"consumer_rate": 1e5},
        },
        True,
        "cpu",
    ),
    # not JPEG, no consumer rate, a transform of the user's, no trial, no decoded size: no advice
    ("DEC-1", {"trial": DECODED, "workload": {"consumer_rate": 1e5}}, False, ...),
    ("DEC-1", {"profile": JPEG, "trial": DECODED, "workload": {"consumer_rate": None}}, False, ...),
    (
        "DEC-1",
        {"profile": JPEG, "trial": DECODED, "workload": {"transform": "m:f", "consumer_rate": 1e5}},
        False,
        ...,
    ),
    ("DEC-1", {"profile": JPEG, "workload": {"consumer_rate": 1e5}}, False, ...),
    ("DEC-1", {"profile": JPEG, "trial": {}, "workload": {"consumer_rate": 1e5}}, False, ...),
]

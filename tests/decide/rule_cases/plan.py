"""The job and its machine: cases for advisor/decide/rules/plan.py."""

from tests.decide.rule_cases import Case
from tests.decide.rule_cases.common import GB, SMALL_SET

# an 8-GPU node of 96 cores, 1 TB of RAM, 8 TB of NVMe and a 400 Gbit/s network (a p4d)
NODE = {
    "cores": 96,
    "gpus": 8,
    "gpu": "A100-40GB",
    "ram_bytes": 1152 * GB,
    "local_disk_bytes": 8000 * GB,
    "network_gbps": 400.0,
}
ON_NODE = {"hardware": {"target": NODE}, "workload": {"gpus_per_node": 8}}

CASES: list[Case] = [
    # the job: many ranks, or another machine
    ("PLAN-1", {"workload": {"nodes": 2}}, True, ...),
    ("PLAN-1", ON_NODE, True, ...),
    ("PLAN-1", {"hardware": {"target": {"cores": 2.0}}}, True, ...),
    ("PLAN-1", {}, False, ...),  # one rank on this machine: nothing beyond the rank's figures
    # 8 ranks of 150 MB shards on a 10 Gbit/s node: their reads fill its network
    (
        "PLAN-2",
        {"hardware": {"target": {**NODE, "network_gbps": 10.0}}, "workload": {"gpus_per_node": 8}},
        True,
        ...,
    ),
    ("PLAN-2", ON_NODE, True, ...),
    # a copy of 30 GB over 400 Gbit/s takes no less than 0.6 s
    (
        "PLAN-2",
        {**ON_NODE, "profile": SMALL_SET, "workload": {"gpus_per_node": 8, "epochs": 5}},
        True,
        0.6,
    ),
    ("PLAN-2", {"hardware": {"target": {"cores": 96}}}, False, ...),  # no network figure
    ("PLAN-2", {}, False, ...),
    # what a plan rests on: the node's cores shared by its 8 ranks
    ("PLAN-3", ON_NODE, True, 12.0),
    ("PLAN-3", {"hardware": {"cores": 2, "target": {"cores": 1.5}}, "trial": {}}, True, 1.5),
    ("PLAN-3", {"workload": {"nodes": 8}}, False, ...),  # this machine
]

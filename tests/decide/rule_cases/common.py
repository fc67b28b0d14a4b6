"""Data-set shapes and cases more than one family's cases use."""

MB, GB, TB = 10**6, 10**9, 10**12

ONE_MB = {"count": 200_000, "size": MB, "fmt": "npy", "spo": 1}  # 200 GB: streamed
TWO_HUNDRED_MB = {"size": 200 * MB, "fmt": "npy", "spo": 1}
SMALL_FILES = {"count": 20_000_000, "size": 100_000, "fmt": "jpeg", "spo": None}
HUGE_SMALL = {"count": 200_000_000, "size": 100_000, "fmt": "jpeg", "spo": None}
HUGE_LARGE = {"count": 140_000, "size": 150 * MB}
SMALL_SET = {"count": 200, "size": 150 * MB}  # 30 GB of 150 MB shards
LOCAL = {"uri": "/data/train"}
# 5 GB of 100 KB images streamed (no room to copy): each GET is open 30 ms + 1.1 ms
SMALL_STREAM = {
    "profile": {"count": 50_000, "size": 100_000, "fmt": "jpeg", "spo": None},
    "hardware": {"disk_free": 0},
}
# 2 ranks streaming 20 KB text objects, each at its share of the 10 Gbit/s NIC (625 MB/s, 31,250
# objects/s; RD-1 keeps 2 x 3,000/s x 30.2 ms = 182 requests in flight per worker): 62,500 GET/s
# on one prefix, 18 prefixes at 3,500 GET/s each
PFX_BY_RATE = {
    "profile": {"count": 90_000, "size": 20_000, "fmt": "text", "spo": 1},
    "hardware": {"cores": 32, "disk_free": GB},
    "workload": {"gpus_per_node": 2, "consumer_rate": 100_000.0},
}

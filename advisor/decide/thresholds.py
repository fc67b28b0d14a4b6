"""Every threshold the rules use, each with its source.

The sources are the sections of docs/sources.md ([SRC], [IO], [CPP], [ORC]) or a
quantity the advisor measures; docs/decision-flow.md traces each rule to them.
"""

from __future__ import annotations

# The loader must beat the consumer by 20% (HEADROOM); "within the measured noise" never spans
# more than 5% of the best median (NOISE_CAP: the quality bar asks a mean of 95% of the best
# count). Their home is the model, which the trial's count search shares.
from advisor.core.model import HEADROOM as HEADROOM
from advisor.core.model import NOISE_CAP as NOISE_CAP
from advisor.core.units import GB, MB, TB
from native_loader.shm_plan import SHM_SHARE

SMALL_SET_BYTES = 100 * GB  # [SRC] "small (< 50-100 GB) -> File mode"
LARGE_FILE_BYTES = 50 * MB  # [SRC] "large files (> 50 MB)"; [CPP] shard floor 50 MB
SMALL_FILE_BYTES = 1 * MB  # [IO] "files of 1-128 MB"; below, a GET carries too little payload
MANY_FILES = 100_000  # [SRC] benchmark: 1.5 M small files -> File mode download dominates
SHARED_CACHE_BYTES = 10 * TB  # [ORC] distributed cache "worth it when >= 10 TB"
SHARD_TARGET_BYTES = 150 * MB  # [SRC] "~150 MB containers"
SHARD_MIN_BYTES, SHARD_MAX_BYTES = 50 * MB, 200 * MB  # [CPP] "50-200 MB"
SHARD_FLOOR_BYTES = 1 * MB  # [IO] "1-128 MB": never smaller than 1 MB
SHARDS_PER_READER = 4  # enough shards per worker to shuffle by reordering shards [SRC]
PREFIX_GET_RATE = 3_500  # GET/s per prefix we plan for (S3 serves ~5,500 GET/s per prefix)
S3_PREFIX_GET_LIMIT = 5_500  # GET/s per prefix S3 Standard serves before 503 SlowDown
S3_EXPRESS_BUCKET_GET_LIMIT = 200_000  # GET/s per directory bucket by default (S3 Express)
THROTTLED_SHARE = (0.8, 0.95)  # of a limit the readers hold when asked 3x (bench throttle)
MANY_RANKS = 8  # [CPP] "many nodes hit one prefix"
FILE_MODE_MB_S = 200.0  # [SRC] File mode download ~200 MB/s
FASTFILE_LIST_OBJECTS_S = 5_500.0  # [SRC] FastFile lists ~5,500 objects/s
LIST_PAGE_KEYS = 1_000  # S3 ListObjectsV2 answers at most 1,000 keys a request
INDEX_BYTES_PER_KEY = 100  # native_loader's listing index, at most (test_native_index.py)
GET_PRICE_PER_MILLION = 0.40  # [SRC] 3: a million GET requests ~$0.40
EFS_BASELINE_MB_S_PER_TB = 150.0  # [SRC] EFS bursting baseline
FSX_USD_PER_TB_MONTH, FSX_MIN_TB = 140.0, 1.2  # [SRC] FSx Scratch 2
S3_USD_PER_TB_MONTH = 23.0  # [SRC]
FSX_INDEX_OBJECTS_PER_HOUR = 2_000_000.0  # [SRC] indexing ~2 M objects takes about an hour
TOLERANCE = 0.05  # "within 5% of the best"
# A stage limits the loader only when the measured rate reaches this share of the stage's
# ceiling (its capacity, from its measured cost): below it, the stage leaves at least a fifth of
# its capacity unused, so something else holds the loader back. A fifth covers the model's
# measured error at the chosen count (5-20%, python -m bench advisor-check).
BOTTLENECK_SHARE = 0.8
MAX_SEARCH_WORKERS = 32  # the model's search range when cores do not bound it
DEFAULT_WORKER_RSS_BYTES = 400 * MB  # a forked worker holding torch and the dataset object
RAM_FRACTION_FOR_WORKERS = 0.75  # leave a quarter of available RAM for the main process
PINNED_GAIN = 1.1  # pinned copies must be >= 10% faster to be worth the locked memory
SHM_FRACTION = SHM_SHARE  # in-flight batches may use at most half of /dev/shm's free bytes

# CPU seconds per sample by format when the trial did not time the decoder (low confidence).
DEFAULT_CPU_S_PER_SAMPLE: dict[str, float] = {
    "jpeg": 0.004,
    "png": 0.006,
    "tar": 0.004,  # WebDataset shards mostly hold images
    "recordio": 0.004,
    "tfrecord": 0.002,
    "mds": 0.002,
    "parquet": 0.0002,
    "npy": 0.0002,
    "jsonl": 0.00005,
    "text": 0.00005,
}
DEFAULT_CPU_S = 0.001

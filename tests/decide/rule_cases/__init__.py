"""Rule cases as data, one module per rule family (the modules of advisor/decide/rules/).

Each module holds `CASES`: (rule id, overrides, fires, expected value or ... for "any"). The
overrides change a baseline: 150 GB of 150 MB tar shards (1,000 samples each) on S3, 16 cores,
60 GB RAM free, 32 GB /dev/shm, 2 TB NVMe free, one A100, consumer 1,000 samples/s, batch 32,
1 epoch, no trial; "trial": {} adds the default trial (see tests/decide/test_rules.py, which
runs them).
"""

from typing import Any

Case = tuple[str, dict[str, Any], bool, Any]

"""The loader many tutorials write: boto3 in `__getitem__`, a Pillow decode, no workers.

`python -m advisor diagnose tutorial_loader:make_loader ...` (run from this folder) measures it;
README.md shows it against the demo data. The endpoint and credentials come from the standard
AWS chain (`AWS_ENDPOINT_URL` for a local server); BUCKET and PREFIX from the environment.
"""

from __future__ import annotations

import io
import os

import boto3
import torch
from PIL import Image

BUCKET = os.environ.get("TUTORIAL_BUCKET", "loader-advisor-demo")
PREFIX = os.environ.get("TUTORIAL_PREFIX", "small-images/")


class S3Images(torch.utils.data.Dataset[torch.Tensor]):
    def __init__(self) -> None:
        pages = boto3.client("s3").get_paginator("list_objects_v2")
        listed = pages.paginate(Bucket=BUCKET, Prefix=PREFIX)
        self.keys = [o["Key"] for p in listed for o in p.get("Contents", [])]
        self.keys = [k for k in self.keys if k.endswith(".jpg")]
        self.client = None  # made in the process that reads (a worker, or this one)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.client is None:
            self.client = boto3.client("s3")
        body = self.client.get_object(Bucket=BUCKET, Key=self.keys[i])["Body"].read()
        image = Image.open(io.BytesIO(body)).convert("RGB")
        return torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)


def make_loader() -> torch.utils.data.DataLoader[torch.Tensor]:
    return torch.utils.data.DataLoader(S3Images(), batch_size=32, collate_fn=list)

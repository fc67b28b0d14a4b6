"""Where shards go: a local folder (temp file, fsync, rename) or an S3 prefix (boto3's transfer
manager, multipart above `multipart_bytes`). Every write is whole or absent: a reader never sees
half an object. Credentials come from the standard AWS chain (or the explicit ones given).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from advisor.reshard.config import ReshardConfig
from native_loader import Credentials
from native_loader.errors import credential_errors
from native_loader.local_copy import write_atomically
from native_loader.uri import local_path, parse_uri

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


@dataclass(frozen=True)
class Written:
    """What the destination holds after a write: size (B) and sha256 of the bytes sent."""

    size: int
    sha256: str


class Store(Protocol):
    uri: str

    def url(self, name: str) -> str: ...
    def read(self, name: str) -> bytes | None: ...
    def put_small(self, name: str, data: bytes) -> None: ...
    def put_shard(self, name: str, data: bytes) -> Written: ...
    def size(self, name: str) -> int | None: ...
    def names(self, prefix: str = "") -> list[str]: ...
    def delete(self, name: str) -> None: ...
    def clean_interrupted(self, names: Iterable[str]) -> int: ...


def open_store(
    uri: str,
    config: ReshardConfig,
    endpoint_url: str | None = None,
    profile: str | None = None,
    credentials: Credentials | None = None,
) -> Store:
    scheme, bucket, key = parse_uri(uri)
    if scheme == "file":
        return LocalStore(local_path(bucket, key))
    return S3Store(bucket, key, config, endpoint_url, profile, credentials)


class LocalStore:
    def __init__(self, folder: str) -> None:
        self.folder = folder.rstrip("/") or "/"
        self.uri = self.folder + "/"

    def url(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def read(self, name: str) -> bytes | None:
        try:
            with open(self.url(name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def put_small(self, name: str, data: bytes) -> None:
        self._write_atomic(name, data)

    def put_shard(self, name: str, data: bytes) -> Written:
        self._write_atomic(name, data)
        digest, size = hashlib.sha256(), 0  # read back: what the disk holds, not what we sent
        with open(self.url(name), "rb") as f:
            while chunk := f.read(2**20):
                digest.update(chunk)
                size += len(chunk)
        return Written(size, digest.hexdigest())

    def _write_atomic(self, name: str, data: bytes) -> None:
        write_atomically(self.url(name), data)  # ".<name>.<pid>.tmp" until it is whole

    def size(self, name: str) -> int | None:
        try:
            return os.stat(self.url(name)).st_size
        except FileNotFoundError:
            return None

    def names(self, prefix: str = "") -> list[str]:
        found = []
        for root, _, files in os.walk(self.folder):
            for file in files:
                rel = os.path.relpath(os.path.join(root, file), self.folder)
                if rel.startswith(prefix):
                    found.append(rel)
        return sorted(found)

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.url(name))

    def clean_interrupted(self, names: Iterable[str]) -> int:
        """Remove the temp files that a killed writer of `names` left (``.<name>.<pid>.tmp``,
        the pid no longer running here); how many were removed."""
        removed = 0
        for name in names:
            folder, base = os.path.split(self.url(name))
            try:
                entries = os.listdir(folder)
            except FileNotFoundError:
                continue
            for entry in entries:
                pid = entry[len(base) + 2 : -len(_TEMP)]
                if (
                    entry.startswith(f".{base}.")
                    and entry.endswith(_TEMP)
                    and pid.isdigit()
                    and not _running(int(pid))
                ):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(folder, entry))
                        removed += 1
        return removed


_TEMP = ".tmp"


def _running(pid: int) -> bool:
    """Whether process `pid` runs on this machine (its temp file may still be written)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class S3Store:
    def __init__(
        self,
        bucket: str,
        prefix: str,
        config: ReshardConfig,
        endpoint_url: str | None,
        profile: str | None,
        credentials: Credentials | None,
    ) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.uri = f"s3://{bucket}/{self.prefix}"
        self.throttled = 0
        self.retries = 0
        self._lock = threading.Lock()
        with credential_errors(profile):
            session = boto3.session.Session(
                profile_name=profile,
                aws_access_key_id=credentials.access_key if credentials else None,
                aws_secret_access_key=credentials.secret_key if credentials else None,
                aws_session_token=credentials.session_token if credentials else None,
            )
        self.client: S3Client = session.client(
            "s3",
            endpoint_url=endpoint_url,
            config=Config(
                s3={"addressing_style": "path"} if endpoint_url else {},
                retries={"max_attempts": 10, "mode": "adaptive"},  # backs off on SlowDown
                connect_timeout=10,
                read_timeout=120,
                max_pool_connections=max(10, config.write_concurrency * 2),
            ),
        )
        self.client.meta.events.register("needs-retry.s3", self._count_retry)
        self.part_size = config.multipart_bytes
        self.transfer = TransferConfig(
            multipart_threshold=config.multipart_bytes,
            multipart_chunksize=config.multipart_bytes,
            max_concurrency=config.write_concurrency,
        )

    def _count_retry(self, response: Any = None, attempts: int = 0, **_: Any) -> None:
        if response is None or attempts < 1:
            return
        status = response[1].get("ResponseMetadata", {}).get("HTTPStatusCode") if response[1] else 0
        if (status and status >= 500) or response[0] is None:
            with self._lock:
                self.retries += 1
                self.throttled += status == 503

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{name}"

    def read(self, name: str) -> bytes | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
            return body.read()
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise _translate(exc, self.url(name)) from exc

    def put_small(self, name: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data)
        except Exception as exc:
            raise _translate(exc, self.url(name)) from exc

    def put_shard(self, name: str, data: bytes) -> Written:
        key = self.prefix + name
        try:
            self.client.upload_fileobj(io.BytesIO(data), self.bucket, key, Config=self.transfer)
            head = self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise _translate(exc, self.url(name)) from exc
        stored_etag = str(head.get("ETag", "")).strip('"')
        expected = s3_etag(data, self.part_size)
        if stored_etag != expected:
            raise OSError(
                f"{self.url(name)}: stored ETag {stored_etag} != {expected} of the data sent"
            )
        return Written(int(head["ContentLength"]), hashlib.sha256(data).hexdigest())

    def size(self, name: str) -> int | None:
        try:
            return int(
                self.client.head_object(Bucket=self.bucket, Key=self.prefix + name)["ContentLength"]
            )
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise _translate(exc, self.url(name)) from exc

    def names(self, prefix: str = "") -> list[str]:
        found = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            for page in pages:
                found += [o["Key"][len(self.prefix) :] for o in page.get("Contents", [])]
        except Exception as exc:
            raise _translate(exc, self.uri) from exc
        return sorted(found)

    def delete(self, name: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)
        except Exception as exc:
            raise _translate(exc, self.url(name)) from exc

    def clean_interrupted(self, names: Iterable[str]) -> int:
        """Abort the incomplete multipart uploads of `names` that a killed run left (S3 bills
        their parts until then); how many were aborted."""
        keys = {self.prefix + name for name in names}
        aborted = 0
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=self.prefix
            )
            for page in pages:
                for upload in page.get("Uploads", []):
                    if upload["Key"] in keys:
                        self.client.abort_multipart_upload(
                            Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                        )
                        aborted += 1
        except Exception as exc:
            raise _translate(exc, self.uri) from exc
        return aborted


def s3_etag(data: bytes, part_size: int) -> str:
    """The ETag S3 gives `data` uploaded by the transfer manager with this part size: the MD5
    for one PUT, else the MD5 of the parts' MD5s and ``-<parts>``."""
    if len(data) < part_size:
        return hashlib.md5(data, usedforsecurity=False).hexdigest()
    digests = [
        hashlib.md5(data[i : i + part_size], usedforsecurity=False).digest()
        for i in range(0, len(data), part_size)
    ]
    combined = hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()
    return f"{combined}-{len(digests)}"


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _translate(exc: BaseException, uri: str) -> OSError:
    """botocore errors as Python built-ins (the original stays as __cause__)."""
    code = _code(exc)
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return PermissionError(f"{uri}: access denied ({code}): the destination is not writable")
    if code in ("NoSuchBucket", "NoSuchKey", "404"):
        return FileNotFoundError(f"{uri}: {code}")
    name = type(exc).__name__
    if "Timeout" in name:
        return TimeoutError(f"{uri}: {name}")
    if "Connect" in name or "Connection" in name:
        return ConnectionError(f"{uri}: {name}")
    return OSError(f"{uri}: {code or name}")

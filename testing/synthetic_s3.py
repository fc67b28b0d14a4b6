"""A synthetic S3 endpoint: one bucket whose keys are computed, not stored.

    with SyntheticS3(Keyspace(count=1_000_000, size=1024)) as s3:   # s3://synth/train/...
        client = s3.boto3_client()                                 # or env=s3.env() for a child
        body = client.get_object(Bucket="synth", Key=s3.space.key(7))["Body"].read()
        assert body == s3.space.body(s3.space.key(7))

Key i is `{prefix}{i:08d}{suffix}` (wider where the count needs it, so that key order is index
order), every object is `size` bytes, its body is the key and `SEPARATOR` repeated (a reader
checks what it read with `Keyspace.body`; binary, as an encoded sample is) and its ETag the
key's MD5.
The server answers ListObjectsV2 (prefix, delimiter, max-keys up to 1000, continuation-token,
start-after, encoding-type), HEAD and GET of an object (one Range, If-Match) and HEAD of the
bucket, over HTTP/1.1 with keep-alive on 127.0.0.1; it accepts any signature or none. It runs in
a process of its own (`python -m testing.synthetic_s3`), so that its interpreter's GIL and CPU are
not the measured client's: a page of 1,000 keys costs it a few milliseconds (`python -m bench
scale` reports its CPU time beside each figure), so a listing's time is the client's.

This module holds the HTTP server and the process that runs it; the keys and bodies are
`testing.synthetic_keyspace`'s, the answers to requests `testing.synthetic_answers`'.

Test infrastructure: not part of the installed package.
"""

from __future__ import annotations

import argparse
import asyncio
import email.utils
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from advisor.demo.server import die_with_parent
from testing.synthetic_answers import Response, answer, s3_error
from testing.synthetic_keyspace import Keyspace

HOST = "127.0.0.1"
IDLE_TIMEOUT_S = 120.0  # a keep-alive connection with no request for this long is closed
MAX_HEAD_BYTES = 64 * 1024
MAX_REQUEST_BODY = 1024 * 1024  # a body sent to this read-only server is read and dropped


_REASONS = {
    200: "OK", 206: "Partial Content", 400: "Bad Request", 404: "Not Found",
    405: "Method Not Allowed", 412: "Precondition Failed", 416: "Range Not Satisfiable",
    501: "Not Implemented",
}  # fmt: skip


def _encode(response: Response, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}"]
    headers = {
        "Date": email.utils.formatdate(usegmt=True),
        "Server": "synthetic-s3",
        "x-amz-request-id": "synthetic",
        **response.headers,
        "Content-Length": str(len(response.body)),
        "Connection": "keep-alive" if keep_alive else "close",
    }
    lines += [f"{name}: {value}" for name, value in headers.items()]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if response.head_only else head + response.body


async def _serve_connection(
    space: Keyspace, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            request, *header_lines = raw.decode("latin-1").split("\r\n")
            method, target, version = request.split(" ", 2)
            headers = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                if name:
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if length > MAX_REQUEST_BODY or "transfer-encoding" in headers:
                writer.write(_encode(s3_error(400, "BadRequest", "no bodies", target), False))
                break
            if length:
                await asyncio.wait_for(reader.readexactly(length), IDLE_TIMEOUT_S)
            close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
            writer.write(_encode(answer(space, method.upper(), target, headers), not close))
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    except (asyncio.TimeoutError, ValueError):  # idle, or a head that is not HTTP
        pass
    finally:
        writer.close()


async def _serve(space: Keyspace, port: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(space, r, w),
        HOST, port, limit=MAX_HEAD_BYTES, backlog=1024, reuse_address=True,
    )  # fmt: skip
    bound = server.sockets[0].getsockname()[1]
    print(f"listening http://{HOST}:{bound}", flush=True)  # what SyntheticS3 waits for
    async with server:
        await server.serve_forever()


class SyntheticS3:
    """The endpoint's process, from `__enter__` (listening, or RuntimeError within
    `start_timeout_s`) to `__exit__` (stopped). The server binds a free port itself (port 0) and
    says which: no other program can take it between the choice and the bind. `url`: the
    endpoint; `pid`: the server's process (its CPU time is the server's load)."""

    def __init__(self, space: Keyspace | None = None, *, start_timeout_s: float = 10.0) -> None:
        self.space = space or Keyspace()
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        # the server's stderr, kept as long as the server runs (a pipe nobody reads would fill)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        self.url = ""

    @property
    def pid(self) -> int:
        assert self._process is not None, "the endpoint is not started"
        return self._process.pid

    def env(self) -> dict[str, str]:
        """A child's environment for this endpoint: its URL and dummy credentials (the server
        checks no signature), nothing of this process's AWS settings."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return base | {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "synthetic",
            "AWS_SECRET_ACCESS_KEY": "synthetic",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def boto3_client(self, **config: Any) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="synthetic", aws_secret_access_key="synthetic",
            config=Config(max_pool_connections=32, **config),
        )  # fmt: skip

    def __enter__(self) -> SyntheticS3:
        s = self.space
        command = [
            sys.executable, "-m", "testing.synthetic_s3", "--bucket", s.bucket, "--prefix",
            s.prefix, "--keys", str(s.count), "--size", str(s.size), "--suffix", s.suffix,
        ]  # fmt: skip
        parent = os.getpid()
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._log,
            cwd=Path(__file__).resolve().parent.parent,
            preexec_fn=lambda: die_with_parent(parent),
        )  # fmt: skip
        try:
            self.url = self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> str:
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        line = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    waited = f"{self.start_timeout_s:g} s"
                    raise RuntimeError(f"the synthetic S3 server did not listen within {waited}: "
                                       f"{self._log_tail()}")  # fmt: skip
                chunk = os.read(process.stdout.fileno(), 256)
                if not chunk:
                    raise RuntimeError(f"the synthetic S3 server exited ({process.wait(5)}) "
                                       f"before listening: {self._log_tail()}")  # fmt: skip
                line += chunk
        return line.decode().split()[-1]

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].decode(errors="replace").strip() or "(nothing on stderr)"

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            if process.stdout is not None:
                process.stdout.close()
        self._log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testing.synthetic_s3", description=__doc__)
    parser.add_argument("--bucket", default="synth")
    parser.add_argument("--prefix", default="train/")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024, help="bytes of every object")
    parser.add_argument("--suffix", default=".bin")
    parser.add_argument("--port", type=int, default=0, help="default: a free one, printed")
    args = parser.parse_args(argv)
    space = Keyspace(args.bucket, args.prefix, args.keys, args.size, args.suffix)
    asyncio.run(_serve(space, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An S3 listing, page by page (`S3Reader.list`): ListObjectsV2 requests through the engine,
each key yielded once, in key order within a page."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from native_loader.errors import S3Error
from native_loader.results import ObjectInfo


@dataclass(frozen=True)
class ListPages:
    """One listing: `prefix` of `bucket`, `delimiter` ("" for none), at most `max_keys` keys
    (None: all), `page_keys` a request. With `ahead`, the next page is asked for as soon as
    its token is known, while the consumer takes this page's keys (a dataset that streams the
    listing never waits on a page between its reads); a key added meanwhile past the page is
    then left to the next listing. Without, a page is asked for once the last one was taken."""

    bucket: str
    prefix: str
    delimiter: str
    max_keys: int | None
    page_keys: int
    ahead: bool = False


def list_pages(engine: Any, wait: Callable[..., Any], listing: ListPages) -> Iterator[ObjectInfo]:
    """The listing's objects. A page cut short, or truncated without a continuation token, is
    asked again (the engine's retries) and then raised naming the page: never taken as the
    listing's end. A key listed again (pages that overlap, or a server that moved back) is
    yielded once: the keys yielded are remembered, since S3-compatible servers do not all list
    in byte order (SeaweedFS lists ``a/b`` before ``a-c``). `wait(engine, ticket, uri, what=)`:
    the ticket's outcome, or its error raised."""
    bucket, remaining = listing.bucket, listing.max_keys
    uri = f"s3://{bucket}/{listing.prefix}"
    seen: set[str] = set()

    def ask(token: str) -> tuple[str, int] | None:
        if remaining is not None and remaining <= 0:
            return None
        page = listing.page_keys if remaining is None else min(listing.page_keys, remaining)
        ticket = engine.submit_list(bucket, listing.prefix, listing.delimiter, token, page)
        return token, ticket

    asked = ask("")
    try:
        for number in itertools.count(1):
            if asked is None:
                return
            (token, ticket), asked = asked, None
            outcome = wait(engine, ticket, uri, what=f"listing page {number}")
            fresh: list[ObjectInfo] = []  # in key order; each key once, up to max_keys
            listed = [*outcome.entries, *((p, 0, "") for p in outcome.prefixes)]
            for key, size, etag in sorted(listed):
                if key not in seen and (remaining is None or len(fresh) < remaining):
                    seen.add(key)
                    fresh.append(ObjectInfo(f"s3://{bucket}/{key}", key, size, etag))
            remaining = None if remaining is None else remaining - len(fresh)
            # truncated without a new token: a server that never advances would loop forever
            stuck = outcome.truncated and (not outcome.next_token or outcome.next_token == token)
            if outcome.truncated and not stuck and listing.ahead:
                asked = ask(outcome.next_token)
            yield from fresh
            if stuck:
                raise S3Error(
                    f"{uri}: listing page {number} did not advance past its continuation token",
                    code="ProtocolError",
                    uri=uri,
                )
            if outcome.truncated and not listing.ahead:
                asked = ask(outcome.next_token)
    finally:
        if asked is not None:
            engine.cancel(asked[1])  # the page asked ahead, not wanted now

"""The native SigV4 signer against botocore's (the oracle), property-based."""

from __future__ import annotations

import datetime
import string
import urllib.parse
from unittest import mock

from botocore.auth import SIGNED_HEADERS_BLACKLIST, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials
from hypothesis import given, settings
from hypothesis import strategies as st

from native_loader import _native

_RESERVED = {
    "authorization",
    "host",
    "date",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-amz-security-token",
    *SIGNED_HEADERS_BLACKLIST,
}
_HEADER_NAME_CHARS = string.ascii_letters + string.digits + "-"
_HEADER_VALUE_CHARS = (
    string.ascii_letters + string.digits + " \t" + "!#$%&'()*+,-./:;<=>?@[]^_`{|}~\""
)
_KEY_CHARS = st.characters(blacklist_categories=("Cs",))

header_names = st.text(_HEADER_NAME_CHARS, min_size=1, max_size=20).filter(
    lambda n: n.lower() not in _RESERVED
)
headers = st.dictionaries(header_names, st.text(_HEADER_VALUE_CHARS, max_size=40), max_size=5).map(
    lambda d: {k: v for k, v in {k.lower(): v for k, v in d.items()}.items()}
)
secrets = st.text(string.ascii_letters + string.digits + "+/=", min_size=1, max_size=60)
query_pairs = st.lists(
    st.tuples(st.text(_KEY_CHARS, min_size=1, max_size=12), st.text(_KEY_CHARS, max_size=12)),
    max_size=4,
)
timestamps = st.datetimes(
    min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2099, 12, 31)
)


def _quote(value: str, safe: str = "") -> str:
    return urllib.parse.quote(value, safe="-_.~" + safe)


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "HEAD", "PUT", "DELETE", "POST"]),
    host=st.sampled_from(
        ["bucket.s3.us-west-2.amazonaws.com", "s3.amazonaws.com", "127.0.0.1:9000", "minio:443"]
    ),
    scheme=st.sampled_from(["https", "http"]),
    key=st.text(_KEY_CHARS, max_size=40),
    query=query_pairs,
    extra=headers,
    access_key=st.text(string.ascii_uppercase + string.digits, min_size=1, max_size=20),
    secret_key=secrets,
    token=st.one_of(st.none(), secrets),
    region=st.sampled_from(["us-east-1", "eu-central-1", "ap-southeast-2"]),
    when=timestamps,
)
def test_authorization_equals_botocore(
    method: str,
    host: str,
    scheme: str,
    key: str,
    query: list[tuple[str, str]],
    extra: dict[str, str],
    access_key: str,
    secret_key: str,
    token: str | None,
    region: str,
    when: datetime.datetime,
) -> None:
    raw_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query)
    url = f"{scheme}://{host}/{_quote(key, '/')}" + (f"?{raw_query}" if raw_query else "")
    request = AWSRequest(method=method, url=url, headers=dict(extra))
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        S3SigV4Auth(BotoCredentials(access_key, secret_key, token), "s3", region).add_auth(request)

    ours = dict(
        _native.sign(
            method,
            url,
            list(extra.items()),
            access_key,
            secret_key,
            token or "",
            region,
            "s3",
            when.strftime("%Y%m%dT%H%M%SZ"),
            "UNSIGNED-PAYLOAD",
        )
    )
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours["x-amz-date"] == request.headers["X-Amz-Date"]
    assert ours["x-amz-content-sha256"] == request.headers["X-Amz-Content-SHA256"]
    assert ours.get("x-amz-security-token") == request.headers.get("X-Amz-Security-Token")


@given(st.text(_KEY_CHARS, max_size=60), st.booleans())
def test_uri_encode_matches_rfc3986(value: str, keep_slash: bool) -> None:
    assert _native.uri_encode(value, keep_slash) == _quote(value, "/" if keep_slash else "")


def test_signature_never_contains_the_secret() -> None:
    headers = dict(
        _native.sign(
            "GET",
            "https://b.s3.amazonaws.com/k",
            [],
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "",
            "us-east-1",
            "s3",
            "20150830T123600Z",
            "UNSIGNED-PAYLOAD",
        )
    )
    assert "wJalrXUtnFEMI" not in " ".join(headers.values())
    assert headers["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="
    )

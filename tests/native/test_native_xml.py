"""ListObjectsV2 parsing in the native module: entities, URL-encoded keys, prefixes, tokens."""

from __future__ import annotations

import pytest

from native_loader import _native

PAGE = """<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix></Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>tok&amp;en/+=</NextContinuationToken>
  <Contents><Key>a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; &#65;&#x42;&#x65E5;</Key>
    <LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>12</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>plain</Key><ETag>"def"</ETag><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>dir/</Prefix></CommonPrefixes>
  <CommonPrefixes><Prefix>other &amp; dir/</Prefix></CommonPrefixes>
</ListBucketResult>"""


def test_entities_prefixes_and_token() -> None:
    entries, prefixes, truncated, token = _native.parse_list_page(PAGE)
    assert entries == [
        ("a & b <c> \"d\" 'e' AB日", 12, '"abc"'),
        ("plain", 0, '"def"'),
    ]
    assert prefixes == ["dir/", "other & dir/"]
    assert truncated is True
    assert token == "tok&en/+="


def test_url_encoded_keys() -> None:
    page = (
        "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
        "<Contents><Key>a+b%2Bc%25d%C3%BC%01</Key><Size>1</Size><ETag>x</ETag></Contents>"
        "<CommonPrefixes><Prefix>p+q/</Prefix></CommonPrefixes></ListBucketResult>"
    )
    entries, prefixes, truncated, token = _native.parse_list_page(page)
    assert entries == [("a b+c%dü\x01", 1, "x")]
    assert prefixes == ["p q/"]
    assert (truncated, token) == (False, "")


def test_empty_listing() -> None:
    page = "<ListBucketResult><IsTruncated>false</IsTruncated><KeyCount>0</KeyCount>"
    page += "</ListBucketResult>"
    assert _native.parse_list_page(page) == ([], [], False, "")


def test_not_a_listing() -> None:
    with pytest.raises(ValueError, match="ListBucketResult"):
        _native.parse_list_page("<Error><Code>NoSuchBucket</Code></Error>")


@pytest.mark.parametrize("cut", [30, 200, 400, len(PAGE) - 3])
def test_a_page_cut_short_is_not_a_listing(cut: int) -> None:
    """What arrived of a cut page parses as fewer entries, perhaps without its token: refused."""
    with pytest.raises(ValueError, match=r"cut short \(its body ends before </ListBucketResult>"):
        _native.parse_list_page(PAGE[:cut])


def test_whitespace_after_the_page_is_whole() -> None:
    assert _native.parse_list_page(PAGE + "\r\n")[2:] == (True, "tok&en/+=")


def test_truncated_without_a_token_is_an_error() -> None:
    page = "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>k</Key><Size>1</Size>"
    page += "</Contents></ListBucketResult>"
    with pytest.raises(ValueError, match=r"IsTruncated=true.*no NextContinuationToken"):
        _native.parse_list_page(page)

"""What the measuring stage's tests share: a data set on the test endpoint, located and
profiled, as a trial starts from it."""

from __future__ import annotations

from advisor.core.location import DatasetLocation
from advisor.demo.server import S3Endpoint
from advisor.measure.profile import DatasetProfile, profile_dataset
from native_loader import S3Reader


def located_profile(endpoint: S3Endpoint, uri: str) -> tuple[DatasetLocation, DatasetProfile]:
    """`uri` on `endpoint`, and its profile as the profile step makes it."""
    location = DatasetLocation(uri, endpoint_url=endpoint.url)
    with S3Reader(location.reader_config()) as reader:
        return location, profile_dataset(location, reader)

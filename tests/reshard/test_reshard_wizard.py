"""The wizard's re-shard offer, driven headless through its widgets against the real endpoint."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.core.workload import Workload
from advisor.demo.datasets import DemoSpec, upload
from advisor.demo.server import S3Endpoint
from advisor.reshard.advice import shard_size_text
from advisor.session import AdvisorSession
from advisor.wizard.controller import WizardController
from advisor.wizard.views import Wizard

SPEC = DemoSpec(images=40, image_kb=(10, 20), classes=4, shard_mb=0.1, large_files=1, large_mb=1)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_offer_estimate_start_and_advise_on_the_shards(
    s3_endpoint: S3Endpoint, s3_bucket: str
) -> None:
    upload(s3_endpoint, s3_bucket, SPEC)
    session = AdvisorSession()
    session.set_location(f"s3://{s3_bucket}/small-images/", endpoint_url=s3_endpoint.url)
    session.set_workload(Workload(batch_size=4))
    controller = WizardController(session)
    wizard = Wizard(controller)
    panel = wizard.recommendation_panel.reshard
    assert panel.box.layout.display == "none"  # nothing advised yet
    real = session.run_profile()
    # the same files, seen as the 500,000-object set they stand for: SRC-3 advises packing
    session.profile = dataclasses.replace(real, object_count=500_000)
    session.run_hardware()
    controller.run_recommend()
    rec = session.recommendation
    assert rec is not None and rec.data_source == "reshard-first"
    assert panel.box.layout.display == ""
    assert panel.destination.value == f"s3://{s3_bucket}/small-images-shards/"
    assert panel.shard_size.value == shard_size_text(rec.shard_size_bytes)

    panel.shard_size.value = "256KB"
    panel.estimate_button.click()
    assert controller.wait(60) and not controller.errors, controller.errors
    assert "plan:" in panel.info.value and "samples" in panel.info.value

    panel.start_button.click()
    assert controller.wait(120) and not controller.errors, controller.errors
    result = panel.step.result
    assert result is not None and result.index_url and panel.progress.value == 1.0

    controller.trial_step.seconds = 3
    panel.advise_button.click()
    assert controller.wait(180) and not controller.errors, controller.errors
    assert "la-reshard-compare" in panel.info.value and "after (shards)" in panel.info.value
    after = panel.step.after
    assert after is not None and after.best_samples_per_s and after.best_samples_per_s > 0
    # the shards, shards.json and classes.json; the _reshard/ bookkeeping is metadata
    assert after.objects == result.shards_total + 2
    assert session.location.uri.endswith("small-images/")  # type: ignore[union-attr]

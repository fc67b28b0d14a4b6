"""Planning for the machine training runs on (issue 56): named once, on the command line and in
the session; the trial measures here as one rank, the model plans there."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from PIL import Image

from advisor.cli import main
from advisor.decide.recommend import recommend
from advisor.measure.hardware import probe_hardware
from advisor.measure.hardware.target import INSTANCES, TargetMachine, lookup_instance
from advisor.report.headline import headline_lines
from advisor.session import AdvisorSession
from tests.builders import make_ctx


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 small JPEGs in 2 class folders: a set the decode dominates."""
    root = tmp_path_factory.mktemp("jpegs")
    for label in ("a", "b"):
        (root / label).mkdir()
        for i in range(30):
            pixels = bytes((i * 7 + j) % 251 for j in range(96 * 96 * 3))
            Image.frombytes("RGB", (96, 96), pixels).save(root / label / f"{i}.jpg")
    return root


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main([*argv, "--json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_the_catalogue_holds_the_common_training_nodes() -> None:
    p4d = lookup_instance("ML.P4D.24XLARGE")  # SageMaker's name, any case
    assert (p4d.cores, p4d.gpus, p4d.gpu, p4d.network_gbps) == (96, 8, "A100-40GB", 400)
    for name in ("p4de.24xlarge", "p5.48xlarge", "g5.48xlarge", "g6.xlarge"):
        machine = INSTANCES[name]
        assert machine.cores >= 4 and machine.gpus and machine.ram_bytes
    with pytest.raises(ValueError, match=r"the catalogue knows: g5\.xlarge"):
        lookup_instance("p9.huge")


def test_an_8_gpu_node_gets_its_cores_not_the_notebooks(
    capsys: pytest.CaptureFixture[str], jpegs: Path
) -> None:
    """The issue's example: without a target, 8 ranks on this machine's cores say so and point
    at the flag; with the node named, each rank gets 12 of its 96 cores."""
    here = _json(
        capsys, "recommend", str(jpegs), "--no-trial", "--consumer-rate", "3000",
        "--gpus-per-node", "8", "--target-gpu", "A100-80GB",
    )  # fmt: skip
    capped = next(d for d in here["decisions"] if d["name"] == "num_workers")
    if "NW-1" in capped["rules"]:
        assert "--target-instance" in capped["rationale"]
    assert capped["confidence"] != "high"
    node = _json(
        capsys, "recommend", str(jpegs), "--no-trial", "--consumer-rate", "3000",
        "--target-instance", "p4de.24xlarge",
    )  # fmt: skip
    assert node["hardware"]["usable_cores"] == 96 and len(node["hardware"]["gpus"]) == 8
    assert node["measured_on"]["usable_cores"] == probe_hardware().usable_cores
    assert node["num_workers"] >= 4  # 12 cores per rank, a CPU-bound decode
    job = next(d for d in node["decisions"] if d["name"] == "job")
    assert {"PLAN-1", "PLAN-3"} <= set(job["rules"])
    assert job["evidence"]["ranks"] == 8
    assert job["evidence"]["job_samples_per_s"] == pytest.approx(
        8 * node["expected_samples_per_s"], rel=0.01
    )
    assert "12 cores per rank" in job["rationale"]


def test_the_plan_leads_with_the_job(capsys: pytest.CaptureFixture[str], jpegs: Path) -> None:
    code = main([
        "recommend", str(jpegs), "--no-trial", "--consumer-rate", "500", "--nodes", "4",
        "--target-instance", "g5.12xlarge", "--quiet",
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    headline = out[out.index("The job:") :].splitlines()[0]
    assert "over 16 ranks" in headline and "before its first batch" in headline
    assert out.index("The job:") < out.index("Change:")
    assert "planned for g5.12xlarge: 48 cores" in out and "measured on this machine" in out


def test_a_fractional_quota_plans_its_part_core() -> None:
    """1.5 cores of CPU time: the trial's counts up to 2 are the model's to choose among, on a
    capacity of 1.5 (before: floor(1.5) = 1 core, and 2 workers were never considered)."""
    case = {"hardware": {"cores": 1.5}, "workload": {"consumer_rate": None}}
    ctx = make_ctx(
        {**case, "trial": {"rates": {0: (300.0, 310.0), 1: (330.0, 335.0), 2: (436.0, 440.0)}}}
    )
    assert ctx.cores_per_rank == 1.5 and ctx.worker_slots == 2
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    assert rec.num_workers == 2
    predicted = {w: ctx.model({}, w).samples_per_s for w in (1, 2)}
    assert predicted[2] > predicted[1]  # the half core a second worker gets


def test_the_trial_measures_here_as_one_rank_and_the_model_plans_there(jpegs: Path) -> None:
    session = AdvisorSession()
    session.set_location(str(jpegs))
    session.run_hardware(target=TargetMachine(cores=48.0, gpus=8, gpu="H100-SXM"))
    session.set_workload(session.workload.__class__(consumer_rate=2000.0, gpus_per_node=8))
    assert session.hardware is not None and session.machine is not None
    assert session.hardware.usable_cores == 48 and session.hardware.gpu_count == 8
    trial = session.run_trial(seconds=6)
    assert trial.setup is not None and trial.setup.gpus_per_node == 1  # one rank, here
    assert trial.setup.usable_cores == session.machine.usable_cores
    assert session.trial is trial  # kept: its costs per sample hold on the target
    rec = session.run_recommend()
    nw = rec.decision("num_workers")
    assert "NW-4" in nw.rules and "the plan is for the target machine" in nw.rationale
    rests = rec.decision("job")
    assert "measured here" in rests.rationale and "6 cores per rank" in rests.rationale
    lines = headline_lines(rec, trial, 2000.0)
    assert lines[0].startswith("The job:") and "over 8 ranks" in lines[0]
    assert any("predicted for the training machine" in line for line in lines)


def test_a_plan_counts_the_loopback_servers_cpu_the_quota_left_out() -> None:
    """A trial under a CPU quota against an S3 server on this machine's loopback: the server's
    CPU per sample (outside the quota's group) is in the busy CPU the model plans with, and
    PLAN-3 says so, with the figure."""
    ctx = make_ctx({"hardware": {"cores": 2, "target": {"cores": 2.0}}, "trial": {}})
    assert ctx.trial is not None
    served = [
        dataclasses.replace(p, machine_cpu_s_per_sample=2e-3, server_cpu_s_per_sample=6e-4)
        for p in ctx.trial.sweep
    ]
    ctx = dataclasses.replace(ctx, trial=dataclasses.replace(ctx.trial, sweep=tuple(served)))
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    job = next(d for d in rec.decisions if "PLAN-3" in d.rules)
    assert "600 µs per sample of the S3 server on this machine's loopback" in job.rationale


def test_a_nodes_striped_nvme_disks_each_add_their_bandwidth() -> None:
    """p5.48xlarge's local disk is 8 NVMe devices of 3.84 TB: striped into one volume, its 8
    ranks share 8 devices' bandwidth. Planned as one device, 2,000 demo JPEGs read in place on
    4 such nodes were bound by the local disk's bandwidth at 1,850 samples/s a rank."""
    p5 = INSTANCES["p5.48xlarge"]
    assert (p5.local_disks, p5.local_disk_bytes) == (8, 8 * 3840 * 10**9)
    assert INSTANCES["p4d.24xlarge"].local_disk_bytes == 8 * 1000 * 10**9
    assert "its 8 NVMe disks striped into one volume (RAID 0)" in p5.assumptions()
    assert "28 TiB local NVMe (8 disks)" in p5.describe()
    node = {"target": dataclasses.asdict(p5)}
    one_disk = {"target": {**node["target"], "local_disks": 1}}
    read = {
        disks: make_ctx({"hardware": hardware, "workload": {"gpus_per_node": 8}})
        .storage_for("copy-local")
        .aggregate_mb_s
        for disks, hardware in ((1, one_disk), (8, node))
    }
    assert read[1] is not None and read[8] == pytest.approx(8 * read[1])


def test_a_job_reads_no_more_before_its_first_batch_than_its_set() -> None:
    """600 images over 4 nodes x 8 ranks: an epoch deals the 600, so the job reads at most the
    600 before its first batch, not ranks x workers x 2 batches of 32 (it said 38,912 reads,
    4.5 GiB, of a 71 MiB set)."""
    node = {"target": dataclasses.asdict(INSTANCES["p5.48xlarge"])}
    ctx = make_ctx(
        {
            "profile": {
                "count": 600,
                "size": 120_000,
                "spo": 1,
                "fmt": "jpeg",
                "uri": "/data/images/",
            },
            "hardware": node,
            "workload": {"gpus_per_node": 8, "nodes": 4, "consumer_rate": 2500.0},
        }
    )
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    assert rec.num_workers >= 2
    job = rec.decision("job").evidence
    assert job["first_batch_reads"] == 600, job
    assert job["first_batch_bytes"] == 600 * 120_000


def test_a_job_with_fewer_shards_than_ranks_counts_the_ranks_that_read() -> None:
    """4 shards over 2 p4d nodes of 8 ranks: 4 ranks are dealt one each, 12 none. The job was
    said to read 16 x the rank's rate, and the next step was more cores per rank."""
    node = {"target": dataclasses.asdict(INSTANCES["p4d.24xlarge"])}
    ctx = make_ctx(
        {
            "profile": {"count": 4, "size": 64_000_000, "spo": 500, "uri": "/data/shards/"},
            "hardware": node,
            "workload": {"gpus_per_node": 8, "nodes": 2, "consumer_rate": 2000.0},
        }
    )
    rec = recommend(ctx.profile, ctx.hardware, ctx.workload, ctx.trial)
    job = rec.decision("job")
    assert job.evidence["ranks"] == 16 and job.evidence["ranks_reading"] == 4
    assert job.evidence["job_samples_per_s"] == pytest.approx(4 * rec.expected_samples_per_s, 0.01)
    assert "Only 4 of the 16 ranks are dealt an object an epoch" in job.rationale
    assert job.evidence["first_batch_reads"] == 4
    lines = headline_lines(rec, None, 2000.0)
    assert "over 16 ranks, 4 of them dealt data" in lines[0], lines
    assert "split the data into at least 16 shards" in lines[-1], lines

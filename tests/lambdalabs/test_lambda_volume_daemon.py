"""A ``volume:`` job on Lambda through the assembled daemon (the provider built from
``providers.lambda`` naming the fake API): the daemon creates the job's filesystem before the
first launch, in the region of the offer placed, and names it in every launch; the first
attempt writes on it, its instance is lost (Lambda sells no spot: a host failure ends it), and
the second attempt, in the same region, reads what the first wrote. The filesystem is deleted
when the job ends. The instance side is played (``tests.kit.volume_agents``) through the fake's
NFS mounts and the instance's boot links."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_lambda import FakeLambda

from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from tests.kit.volume_agents import VolumeAgent

pytestmark = [pytest.mark.lambdalabs, pytest.mark.timeout(300)]


def test_a_volume_job_finds_its_data_again_after_its_instance_is_lost(
        tmp_path: Path, fake: FakeLambda, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.boot_s = 0.0
    config = {"providers": {"lambda": {"endpoint": fake.url}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        agents: dict[str, VolumeAgent] = {}
        monkeypatch.setattr(d.adapter("lambda"), "runner",
                            lambda inst: agents.setdefault(inst.id, VolumeAgent(inst.id, fake.read, fake.write)))
        job = d.submit({"name": "ft", "run": "python train.py", "resources": {"gpu": "A10:1"},
                        "providers": ["lambda"], "volume": {"size": "20GB", "mount": "/data"},
                        "retry": {"max_preemptions": 2}})
        first = d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                        what="the first attempt to start")
        assert first.found is None and first.mounted is None  # a fresh filesystem; nothing to mount
        [fs] = fake.filesystems.values()
        assert fs.files == {"state": b"step 300 written by attempt 1\n"}
        [a1] = d.attempts(job)
        assert fs.region == a1.region and fake.launches[0]["file_system_names"] == [fs.name]
        fake.lose(first.instance_id)

        second = d.until(lambda: next((a for i, a in agents.items() if a.started and i != first.instance_id), None),
                         timeout_s=60, what="a second attempt to start")
        assert second.found == b"step 300 written by attempt 1\n"
        rows = d.attempts(job)
        assert rows[0].reason == TerminationReason.LOST and rows[1].region == a1.region
        second.done = True
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
        d.until(lambda: not fake.filesystems, timeout_s=60, what="the job's filesystem to be deleted")
        assert fake.live() == []

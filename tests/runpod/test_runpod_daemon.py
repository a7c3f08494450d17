"""RunPod through the assembled daemon (``gpuorch daemon``'s own assembly, the provider built
from ``providers.runpod`` naming the fake API): a reclaimed interruptible pod is recorded as a
preemption dated at the reclaim, and the job relaunches from its checkpoint on a new pod.

The fake's pods run nothing, so the instance side is played by a scripted agent (``tests.kit.agents.Agent``,
as in the AWS tests): only the adapter's ``runner`` factory is replaced."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_runpod import FakeRunpod

from gpuorch.provider import InstanceState
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from tests.kit.agents import Agent

pytestmark = [pytest.mark.runpod, pytest.mark.timeout(300)]


def test_a_reclaimed_interruptible_pod_is_a_preemption_and_the_job_relaunches_from_its_checkpoint(
        tmp_path: Path, fake: FakeRunpod, monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"providers": {"runpod": {"api_url": fake.url, "clouds": ["community"]}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        runpod = d.adapter("runpod")
        agents: dict[str, Agent] = {}
        monkeypatch.setattr(runpod, "runner", lambda inst: agents.setdefault(inst.id, Agent()))
        job = d.submit({"name": "qlora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                        "spot_policy": "spot", "retry": {"max_preemptions": 2},
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}"}})
        first = d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                        what="the first pod's agent to start")
        [a1] = d.attempts(job)
        assert a1.spot and a1.instance_id in fake.pods and fake.pods[a1.instance_id].interruptible
        reclaimed_at = fake.reclaim(a1.instance_id)

        second = d.until(lambda: next((a for i, a in agents.items() if a.started and i != a1.instance_id), None),
                         timeout_s=60, what="a second pod's agent to start")
        rows = d.attempts(job)
        assert rows[0].reason == TerminationReason.PREEMPTED
        assert rows[0].ended_at is not None and abs((rows[0].ended_at - reclaimed_at).total_seconds()) <= 1
        assert second.started is not None and first.started is not None
        assert second.started.checkpoint_url == first.started.checkpoint_url  # restores what attempt 1 saved
        assert second.started.attempt == 2
        assert a1.instance_id not in fake.pods, "the reclaimed pod is terminated (it would bill its disk)"
        assert runpod.get(a1.instance_id).state == InstanceState.PREEMPTED

        second.done = True
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.SUCCEEDED
        d.until(lambda: not fake.pods, timeout_s=60, what="the last pod to be terminated")
        assert [i for i in runpod.list_managed() if i.state.alive] == []


def test_an_out_of_stock_market_falls_to_the_next_offer_and_throttling_is_waited_out(
        tmp_path: Path, fake: FakeRunpod, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.out_of_stock("NVIDIA GeForce RTX 4090", "COMMUNITY", interruptible=False)
    config = {"providers": {"runpod": {"api_url": fake.url}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        agents: dict[str, Agent] = {}
        monkeypatch.setattr(d.adapter("runpod"), "runner", lambda inst: agents.setdefault(inst.id, Agent()))
        fake.throttle(2, retry_after="0")
        job = d.submit({"name": "j", "run": "true", "resources": {"gpu": "RTX4090:1"}, "spot_policy": "on-demand"})
        d.until(lambda: any(a.started for a in agents.values()), timeout_s=60, what="an agent to start")
        [pod] = fake.live()
        assert pod.body["cloudType"] == "SECURE"  # the community stock-out was passed over
        assert [i.id for i in d.adapter("runpod").list_managed()] == [pod.id]  # one pod, no stray
        d.until(lambda: d.job(job).status == JobStatus.RUNNING, timeout_s=60, what="the job to run")

"""Kueue (issue 34): with a context's ``local_queue``, the pod carries the LocalQueue label and waits
behind Kueue's admission gate (the fake kubelet plays Kueue: ``gpuorch.testing.fake_kueue``). The
wait is not a failure and not booting: the attempt stays live however long it lasts (here twice
the daemon's ``boot_timeout_s``), the job's message and one event say it waits for admission, and
the boot clock starts at admission. A gang's pods are one Kueue pod group: they wait whole and
start whole. Through the assembled daemon."""

from __future__ import annotations

import dataclasses
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod

from gpuorch.clock import aware, utcnow
from gpuorch.reconciler.decide.attempt_steps import ADMISSION
from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events
from gpuorch.testing.fake_kueue import KUEUE_GATE, KUEUE_QUEUE

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

BOOT_S = 3.0  # the daemon's boot_timeout_s here: the admission takes twice as long


def queued(k8s) -> dict:
    return {"providers": {"kubernetes": k8s.options(context={"local_queue": "team-queue"})}}


def test_an_admission_wait_twice_the_boot_timeout_is_not_a_failure(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    with cluster(tmp_path) as k8s, AssembledDaemon.start(tmp_path / "home", queued(k8s)) as d:
        d.rec.settings = dataclasses.replace(d.rec.settings, boot_timeout_s=BOOT_S)
        job = d.submit({"name": "queued", "run": f"echo ran > {out}", "resources": {"gpu": "A100:80GB:1"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].instance_id, what="the pod to be created")
        (attempt,) = d.attempts(job)
        name = attempt.instance_id.split(":", 1)[1]

        def pod() -> Pod:
            return k8s.client().get(Pod, name, namespace="default")

        assert pod().metadata.labels[KUEUE_QUEUE] == "team-queue"
        d.until(lambda: "SchedulingGated" in (d.job(job).message or ""), what="the job to say it waits")
        assert [g.name for g in pod().spec.schedulingGates] == [KUEUE_GATE]
        inst = d.adapter("kubernetes").get(attempt.instance_id)
        assert inst.queued is not None and inst.queued.startswith("Kueue LocalQueue team-queue: SchedulingGated")
        assert (d.job(job).message or "").startswith(f"{ADMISSION}: Kueue LocalQueue team-queue")
        launched = aware(attempt.launched_at or attempt.requested_at)
        assert launched is not None
        d.until(lambda: utcnow() - launched > timedelta(seconds=2 * BOOT_S), what="twice the boot timeout")
        (waiting,) = d.attempts(job)  # not lost, not relaunched: the same attempt, nothing ended
        assert waiting.status != AttemptStatus.ENDED and waiting.reason is None
        assert d.status(job) == JobStatus.STARTING and pod().spec.nodeName is None and not out.exists()

        k8s.kubelet.admit(name, "default")  # Kueue admits the Workload: the gate goes; the boot clock starts
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        (ran,) = d.attempts(job)
        assert ran.number == attempt.number and ran.reason == TerminationReason.SUCCEEDED
        assert out.read_text().strip() == "ran" and pod().spec.nodeName
        said = [e.message for e in events(d.store, "admission", job)]
        assert len(said) == 1 and said[0].startswith(f"{ADMISSION}: Kueue LocalQueue team-queue"), said
        assert not events(d.store, "lost", job)


def test_a_queued_gang_waits_whole_and_starts_whole(tmp_path: Path) -> None:
    """``nodes: 2`` in a queue: both pods are one pod group; neither is scheduled before Kueue
    admits the group, and admitting it starts both; the gang's job runs and succeeds."""
    out = tmp_path / "out"
    out.mkdir()
    run = f"{sys.executable} -c \"import os; open('{out}/' + os.environ['NODE_RANK'], 'w').write('ran')\""
    with cluster(tmp_path) as k8s, AssembledDaemon.start(tmp_path / "home", queued(k8s)) as d:
        job = d.submit({"name": "gang", "run": run, "nodes": 2, "resources": {"gpu": "A100:80GB:1"}})
        d.until(lambda: (a := d.attempts(job)) and a[-1].instance_id, what="the gang's pods to be created")
        node0 = d.attempts(job)[-1].instance_id.split(":", 1)[1]
        names = [node0, f"{node0}-n1"]
        client = k8s.client()

        def held(name: str) -> bool:
            p = client.get(Pod, name, namespace="default")
            return bool(p.spec.schedulingGates) and p.spec.nodeName is None and bool(p.status and p.status.conditions)

        d.until(lambda: all(held(n) for n in names), what="both pods to wait behind Kueue's gate")
        d.until(lambda: (d.job(job).message or "").startswith(ADMISSION), what="the job to say it waits")
        for _ in range(3):  # waits whole: nothing of the gang scheduled, nothing ended
            d.run_pass()
        assert all(held(n) for n in names) and not list(out.iterdir())
        assert [a.status for a in d.attempts(job)] != [AttemptStatus.ENDED]
        k8s.kubelet.admit(names[1], "default")  # either pod names the Workload: the group is admitted whole
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        assert sorted(p.name for p in out.iterdir()) == ["0", "1"]
        (ran,) = d.attempts(job)
        assert ran.reason == TerminationReason.SUCCEEDED
        assert len(events(d.store, "admission", job)) == 1


def test_a_queued_pod_is_launched_when_scheduled() -> None:
    """A pod of a LocalQueue: ``queued`` until the scheduler binds it, and its ``created_at`` (the
    daemon's boot clock and billing) is that binding; one deleted before admission bills nothing."""
    from datetime import UTC, datetime

    from gpuorch.provider.port import InstanceState
    from gpuorch_kubernetes import pods

    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    meta = {"name": "p", "namespace": "default", "creationTimestamp": "2026-01-01T10:00:00Z",
            "labels": {KUEUE_QUEUE: "team"}, "annotations": {}}
    gated = {"metadata": meta, "spec": {"schedulingGates": [{"name": KUEUE_GATE}]}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                            "message": "blocked"}]}}
    inst = pods.to_instance(gated, provider="kubernetes", region="r", instance_id="r:p", lost_node=None, now=now)
    assert inst.state == InstanceState.PENDING and inst.created_at is None
    assert inst.queued == "Kueue LocalQueue team: SchedulingGated: blocked"
    bound = {"metadata": meta, "spec": {"nodeName": "n1"}, "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T11:30:00Z"}]}}
    inst = pods.to_instance(bound, provider="kubernetes", region="r", instance_id="r:p", lost_node=None, now=now)
    assert inst.queued is None and inst.created_at == datetime(2026, 1, 1, 11, 30, tzinfo=UTC)
    gone = {**gated, "metadata": {**meta, "deletionTimestamp": "2026-01-01T11:00:00Z"},
            "status": {"phase": "Failed"}}
    inst = pods.to_instance(gone, provider="kubernetes", region="r", instance_id="r:p", lost_node=None, now=now)
    assert not inst.state.alive and inst.queued is None and inst.created_at == inst.ended_at
    plain = {**bound, "metadata": {**meta, "labels": {}}}
    inst = pods.to_instance(plain, provider="kubernetes", region="r", instance_id="r:p", lost_node=None, now=now)
    assert inst.created_at == datetime(2026, 1, 1, 10, tzinfo=UTC)  # not queued: its creation

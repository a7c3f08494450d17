"""Installations sharing one checkpoint store never resume each other's jobs (issue 31).

The prefix was ``<store>/<name>-<id>/``: job 1 of a fresh ``GPUORCH_HOME`` found the completion
record of another installation's job 1 there, trained nothing, reported that run's result and
was billed. Now each job's prefix is ``<store>/<installation>/<name>-<id>/``, manifests and
records name their installation and job, and the agent refuses any other, with a job event
that says why. A job stored before namespacing still resumes from its old prefix, but only a
checkpoint the daemon recorded for it.

Through the assembled daemon: two homes, two installations, one ``file://`` store.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuorch.checkpoint import Owner, join_key, list_manifests, open_store, upload
from gpuorch.store.models import Checkpoint, Job, JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(600)

# Writes one checkpoint per the agent protocol (marked with whose run made it) and reports who
# ran and which run's checkpoint it resumed from.
JOB = r"""
set -e
origin=""
step=3
if [ -n "$GPUORCH_RESUMED_FROM" ]; then
  origin=$(cat "$GPUORCH_CHECKPOINT_DIR/$GPUORCH_RESUMED_FROM/origin"); step=6
fi
mkdir -p "$GPUORCH_CHECKPOINT_DIR/step-$step"
echo "$WHO" > "$GPUORCH_CHECKPOINT_DIR/step-$step/origin"
echo "{\"step\": $step}" > "$GPUORCH_CHECKPOINT_DIR/step-$step/COMPLETE"
printf '{"who": "%s", "resumed_origin": "%s", "step": %s}' "$WHO" "$origin" "$step" > "$GPUORCH_RESULT_FILE"
"""


def spec(store: Path, who: str) -> dict:
    return {"name": "train", "run": JOB, "env": {"WHO": who}, "resources": {"gpu": "A100:80GB:1"},
            "spot_policy": "on-demand", "checkpoint": {"store": store.as_uri(), "interval": "1s"}}


def result(d: AssembledDaemon, job_id: int) -> dict:
    job = d.until_terminal(job_id)
    assert job.status == JobStatus.SUCCEEDED, (job.message, d.attempts(job_id), d.service.events(str(job_id)))
    return json.loads(job.result or "null")


def refusals(d: AssembledDaemon, job_id: int) -> list[str]:
    return [e["message"] for e in d.service.events(str(job_id)) if e["kind"] == "checkpoint_refused"]


def checkpoint_dir(tmp_path: Path, name: str, step: int, origin: str, completed_at: float | None = None) -> Path:
    path = tmp_path / "planted" / name
    path.mkdir(parents=True)
    (path / "origin").write_text(origin + "\n")
    (path / "COMPLETE").write_text(json.dumps({"step": step}))
    if completed_at is not None:
        os.utime(path / "COMPLETE", (completed_at, completed_at))
    return path


def test_a_second_installation_never_resumes_the_firsts_job_1(tmp_path):
    store = tmp_path / "shared-store"
    with AssembledDaemon.start(tmp_path / "home-a") as a:
        job_a = a.submit(spec(store, "a"))
        assert result(a, job_a) == {"who": "a", "resumed_origin": "", "step": 3}
        inst_a = a.store.installation_id
    fs, _ = open_store(store.as_uri())
    [m] = list_manifests(fs, f"{inst_a}/train-{job_a}")  # namespaced, and the manifest names its owner
    assert (m.installation, m.job_id, m.job_name, m.attempt) == (inst_a, job_a, "train", 1)

    with AssembledDaemon.start(tmp_path / "home-b") as b:
        assert b.store.installation_id != inst_a
        job_b = b.submit(spec(store, "b"))
        assert job_b == job_a == 1  # the same job id and name in a fresh home
        # It trains itself (its own result, from scratch), not the other installation's run.
        assert result(b, job_b) == {"who": "b", "resumed_origin": "", "step": 3}
        [att] = b.attempts(job_b)
        assert att.resumed_from is None and att.restore_refused is None
        assert refusals(b, job_b) == []  # nothing of A's was even in its prefix
        [mb] = list_manifests(fs, f"{b.store.installation_id}/train-{job_b}")
        assert (mb.installation, mb.job_id) == (b.store.installation_id, job_b)
    [m_again] = list_manifests(fs, f"{inst_a}/train-{job_a}")  # A's checkpoint untouched
    assert m_again == m


def test_a_planted_checkpoint_of_another_installation_or_job_is_refused_with_an_event(tmp_path):
    store = tmp_path / "shared-store"
    fs, _ = open_store(store.as_uri())
    with AssembledDaemon.start(tmp_path / "home") as d:
        inst = d.store.installation_id
        prefix = join_key(inst, "train-1")  # where job 1 of this installation will look
        # Newest first: another installation's job 1, then this installation's job 7, both copied in.
        upload(fs, prefix, checkpoint_dir(tmp_path, "step-5", 5, "job7"), attempt=1, owner=Owner(inst, 7, 1))
        upload(fs, prefix, checkpoint_dir(tmp_path, "step-9", 9, "elsewhere"), attempt=1,
               owner=Owner("otherinstall", 1, 1))
        job = d.submit(spec(store, "mine"))
        assert job == 1
        assert result(d, job) == {"who": "mine", "resumed_origin": "", "step": 3}  # started fresh
        [att] = d.attempts(job)
        assert att.resumed_from is None
        why = refusals(d, job)
        assert len(why) == 2, (why, d.service.events(str(job)), att)
        assert "step-9" in why[0] and "installation otherinstall, job 1" in why[0] and f"installation {inst}" in why[0]
        assert "step-5" in why[1] and f"installation {inst}, job 7" in why[1] and "not to this job" in why[1]
        assert att.restore_refused == "\n".join(why)
        running = [e["message"] for e in d.service.events(str(job)) if e["kind"] == "running"]
        # No running event when the short job ended before a pass saw it up: its end records all.
        assert all("started fresh" in m for m in running)


def _stored_before_namespacing(d: AssembledDaemon, job_id: int, recorded: dict) -> None:
    """What schema 9's migration leaves for a job of an older gpuorch: its old prefix, and the
    checkpoint rows that daemon recorded."""
    with d.store.write() as s:
        job = s.get(Job, job_id)
        assert job is not None
        job.checkpoint_prefix = f"{job.name}-{job_id}"
        s.add(Checkpoint(job_id=job_id, recorded_at=datetime.now(UTC), **recorded))


def test_a_job_stored_before_namespacing_resumes_only_its_recorded_checkpoint_from_the_old_prefix(tmp_path):
    store = tmp_path / "shared-store"
    fs, _ = open_store(store.as_uri())
    with AssembledDaemon.start(tmp_path / "home") as d:
        # The old layout, written by an older gpuorch: manifests that name no installation or job.
        ours = upload(fs, "train-1", checkpoint_dir(tmp_path, "step-3", 3, "old-self"), attempt=1)
        # Then another installation's job 1, in the same shared old prefix, newer: not ours.
        theirs = upload(fs, "train-1", checkpoint_dir(tmp_path / "b", "step-3", 3, "old-other",
                                                      (ours.completed_at or 0) + 10), attempt=1)
        assert theirs.seq > ours.seq and theirs.name == ours.name
        job = d.submit(spec(store, "new-self"))
        _stored_before_namespacing(d, job, {"attempt": 1, "name": "step-3", "step": 3,
                                            "completed_at": datetime.fromtimestamp(ours.completed_at or 0, UTC)})
        assert result(d, job) == {"who": "new-self", "resumed_origin": "old-self", "step": 6}
        [att] = d.attempts(job)
        assert att.resumed_from == "step-3"
        [why] = refusals(d, job)
        assert "old prefix" in why and "not one this daemon recorded" in why
        # Its new checkpoints go to the namespaced prefix, naming this installation.
        [new] = list_manifests(fs, f"{d.store.installation_id}/train-{job}")
        assert (new.name, new.installation, new.job_id) == ("step-6", d.store.installation_id, job)


def test_the_old_prefix_is_never_read_for_a_job_the_migration_did_not_mark(tmp_path):
    store = tmp_path / "shared-store"
    fs, _ = open_store(store.as_uri())
    with AssembledDaemon.start(tmp_path / "home") as d:
        upload(fs, "train-1", checkpoint_dir(tmp_path, "step-3", 3, "someone"), attempt=1)
        job = d.submit(spec(store, "fresh"))
        assert result(d, job) == {"who": "fresh", "resumed_origin": "", "step": 3}
        assert d.job(job).checkpoint_prefix is None
        assert [a.resumed_from for a in d.attempts(job)] == [None]
        assert refusals(d, job) == []

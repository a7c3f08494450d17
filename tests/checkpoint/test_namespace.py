"""Checkpoint namespaces (issue 31): each manifest names its installation, job and attempt, and a
restore takes only its own job's (``gpuorch.checkpoint.namespace``); a job stored before
namespacing keeps its old prefix (schema 9), where only the checkpoints its daemon recorded
restore."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlmodel import select

from gpuorch.checkpoint import (
    Manifest,
    Owner,
    RecordedCheckpoint,
    job_prefix,
    legacy_refusal,
    open_store,
    refusal,
    upload,
)
from gpuorch.checkpoint.handoff import read_completed, write_completed
from gpuorch.checkpoint.namespace import record_refusal
from gpuorch.store import Store
from gpuorch.store.migrations import MIGRATIONS, migrate
from gpuorch.store.models import Job

OWNER = Owner("inst-a", 1, 2, "train")
V1 = Path(__file__).resolve().parents[1] / "store" / "v1.sql"


def manifest(**kw) -> Manifest:
    fields = dict(name="step-3", step=3, attempt=1, created_at=100.0, completed_at=99.5, seq=1,
                  installation="inst-a", job_id=1, job_name="train")
    return Manifest(**{**fields, **kw})


def checkpoint(root: Path, name: str = "step-3", data: bytes = b"w") -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "weights.bin").write_bytes(data)
    (path / "COMPLETE").write_text('{"step": 3}')
    return path


def test_a_manifest_of_this_job_from_this_or_an_earlier_attempt_restores():
    assert refusal(manifest(attempt=1), OWNER) is None
    assert refusal(manifest(attempt=2), OWNER) is None


@pytest.mark.parametrize(("other", "named"), [
    (dict(installation="inst-b"), "installation inst-b, job 1"),
    (dict(job_id=7), "installation inst-a, job 7"),
    (dict(installation="inst-b", job_id=7), "installation inst-b, job 7"),
    (dict(installation=None), "installation (none), job 1"),
    (dict(job_id=None), "installation inst-a, job (none)"),
])
def test_a_manifest_of_another_installation_or_job_is_refused_naming_both(other, named):
    why = refusal(manifest(**other), OWNER)
    assert why is not None and "step-3" in why and named in why and "installation inst-a, job 1" in why
    assert "\n" not in why


def test_a_manifest_from_a_later_attempt_is_refused():
    why = refusal(manifest(attempt=3), OWNER)
    assert why is not None and "attempt 3" in why and "attempt 2" in why


def test_a_manifest_naming_no_owner_is_refused_unless_the_agent_has_no_installation_either():
    old = manifest(installation=None, job_id=None, job_name=None)
    why = refusal(old, OWNER)
    assert why is not None and "names no installation or job" in why
    assert refusal(old, Owner(None, 1, 1)) is None  # an agent run by hand, as before namespacing
    assert refusal(manifest(), Owner(None, 1, 1)) is not None  # but never another installation's


def test_the_old_prefix_restores_only_a_checkpoint_the_daemon_recorded_for_the_job():
    old = manifest(installation=None, job_id=None, job_name=None)
    recorded = [RecordedCheckpoint("step-3", 1, 3, 99.5)]
    assert legacy_refusal(old, OWNER, recorded) is None
    assert legacy_refusal(old, OWNER, [RecordedCheckpoint("step-3", 1)]) is None  # step and time not recorded
    for wrong in (RecordedCheckpoint("step-4", 1, 3, 99.5), RecordedCheckpoint("step-3", 2, 3, 99.5),
                  RecordedCheckpoint("step-3", 1, 4, 99.5), RecordedCheckpoint("step-3", 1, 3, 42.0)):
        why = legacy_refusal(old, OWNER, [wrong])
        assert why is not None and "not one this daemon recorded for job 1" in why
    assert legacy_refusal(old, OWNER, []) is not None
    assert legacy_refusal(manifest(completed_at=None, installation=None, job_id=None), OWNER, recorded) is not None
    # One that names an owner is held to the namespaced rule even under the old prefix.
    assert legacy_refusal(manifest(installation="inst-b"), OWNER, recorded) is not None
    assert legacy_refusal(manifest(), OWNER, []) is None


def test_the_manifest_names_its_owner_and_reads_back(tmp_path):
    store, _ = open_store((tmp_path / "store").as_uri())
    m = upload(store, "p", checkpoint(tmp_path / "local"), attempt=2, owner=OWNER)
    assert (m.installation, m.job_id, m.job_name, m.attempt) == ("inst-a", 1, "train", 2)
    back = Manifest.from_json(store.get_bytes(m.key("p")).decode())
    assert back == m and '"format": 2' in m.to_json()
    # A format 1 manifest (no owner) still reads, naming none.
    old = Manifest.from_json('{"name": "s", "step": 1, "attempt": 1, "created_at": 1.0, "files": [], "format": 1}')
    assert (old.installation, old.job_id) == (None, None)


def test_an_identical_checkpoint_under_someone_elses_manifest_gets_its_own(tmp_path):
    store, _ = open_store((tmp_path / "store").as_uri())
    ckpt = checkpoint(tmp_path / "local")
    planted = upload(store, "p", ckpt, attempt=1, owner=Owner("inst-b", 1, 1))
    mine = upload(store, "p", ckpt, attempt=1, owner=OWNER)  # same files: not the planted one reused
    assert mine.seq == planted.seq + 1 and refusal(mine, OWNER) is None
    assert upload(store, "p", ckpt, attempt=1, owner=OWNER) == mine  # idempotent for its own


def test_a_completion_record_names_its_owner(tmp_path):
    store, _ = open_store((tmp_path / "store").as_uri())
    write_completed(store, "p", 1, {"loss": 0.1}, Owner("inst-b", 1, 1))
    done = read_completed(store, "p")
    assert done is not None and (done.installation, done.job_id) == ("inst-b", 1)
    why = record_refusal(done.installation, done.job_id, OWNER, "the completion record of attempt 1")
    assert why is not None and "installation inst-b, job 1" in why
    assert record_refusal("inst-a", 1, OWNER, "x") is None
    assert record_refusal(None, None, OWNER, "x") is not None
    assert record_refusal(None, None, Owner(None, 1, 1), "x") is None


@pytest.mark.parametrize("bad", ["", "a/b", ".", ".."])
def test_an_installation_id_that_cannot_name_a_prefix_is_refused(bad):
    with pytest.raises(ValueError, match="cannot name a store prefix"):
        job_prefix(bad, "train", 1)
    assert job_prefix("inst-a", "train", 12) == "inst-a/train-12"


def test_a_file_store_under_the_users_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    store, prefix = open_store("file://~/ckpts")
    store.put_bytes("k", b"v")
    assert prefix == "" and (tmp_path / "me" / "ckpts" / "k").read_bytes() == b"v"


def test_the_migration_keeps_each_stored_jobs_old_prefix_and_new_jobs_get_none(tmp_path):
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.executescript(V1.read_text())
    engine = create_engine(f"sqlite:///{old}")
    with engine.begin() as conn:  # a schema 8 database, as the gpuorch before namespacing left it
        assert migrate(conn, MIGRATIONS[:7]) == 8
    engine.dispose()
    store = Store(f"sqlite:///{old}")
    try:
        with store.read() as s:
            stored = list(s.exec(select(Job)))
        assert stored and all(j.checkpoint_prefix == f"{j.name}-{j.id}" for j in stored)
        with store.write() as s:
            s.add(Job(name="after", spec="{}", created_at=datetime(2026, 2, 1, tzinfo=UTC)))
        with store.read() as s:
            assert s.exec(select(Job).where(Job.name == "after")).one().checkpoint_prefix is None
    finally:
        store.close()
    with sqlite3.connect(old) as db:  # running the step again (a half-applied migration) is harmless
        db.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    Store(f"sqlite:///{old}").close()

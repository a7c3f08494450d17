"""A crash at each of a launch volume's crash points (``gpuorch.reconciler.apply.volumes.for_launch``)
on RunPod, then the same call again as the restarted daemon makes it: one network volume, found
again by its name, and the job's record of it. In process (the crash point raises instead of
SIGKILLing, the store and the fake API are real), to keep the suite's time; the daemon-level
crash tests of a launch are ``test_runpod_crashes.py``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fake_runpod import KEY, FakeRunpod
from sqlmodel import Session, select

from gpuorch.jobs.spec import VolumeRequest
from gpuorch.reconciler.apply import volumes
from gpuorch.store import Store
from gpuorch.store.models import Event, Job
from gpuorch_runpod.config import parse_options
from gpuorch_runpod.provider import RunpodProvider

pytestmark = [pytest.mark.runpod, pytest.mark.chaos]
NOW = datetime(2026, 12, 6, tzinfo=UTC)


class Crash(Exception):
    pass


@pytest.mark.parametrize("point", ["volume.intent", "volume.created"])
def test_a_crash_while_making_a_jobs_volume_converges_on_one_volume(
        point: str, tmp_path: Path, fake: FakeRunpod, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    p = RunpodProvider(parse_options({"api_url": fake.url, "volume_data_center": "EU-RO-1"}), KEY,
                       home=tmp_path / "home", sleep=lambda s: None)
    with store.write() as s:
        job = Job(name="ft", spec="{}", created_at=NOW)
        s.add(job)
        s.flush()
        job_id = job.id or 0

    @contextmanager
    def txn(jid: int) -> Iterator[tuple[Session, Job]]:
        with store.write() as s:
            row = s.get(Job, jid)
            assert row is not None
            yield s, row

    offer = next(o for o in p.offers() if o.region == "secure")
    want = VolumeRequest(size=10, mount="/data")

    def crash_at(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(volumes, "crashpoint", crash_at)
    with pytest.raises(Crash):
        volumes.for_launch(txn, p, store.installation_id, job_id, 1, offer, want, NOW)
    assert len(fake.volumes) == (1 if point == "volume.created" else 0)
    with store.read() as s:
        row = s.get(Job, job_id)
        assert row is not None and (row.volume_provider, row.volume_zone, row.volume_id) == ("runpod", "secure", None)

    monkeypatch.setattr(volumes, "crashpoint", lambda name: None)  # the restarted daemon's call
    spec = volumes.for_launch(txn, p, store.installation_id, job_id, 1, offer, want, NOW)
    [vol] = fake.volumes.values()
    assert (spec.volume_id, spec.mount_path) == (vol.id, "/data")
    with store.read() as s:
        row = s.get(Job, job_id)
        said = s.exec(select(Event.message).where(Event.job_id == job_id, Event.kind == "volume")).all()
    assert row is not None and row.volume_id == vol.id
    assert said and ("found again by its tags" in said[0]) == (point == "volume.created")
    p.close()
    store.close()

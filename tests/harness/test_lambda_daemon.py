"""The assembled daemon with ``providers: {lambda: ...}`` against the fake Lambda API: a job runs
its launch on Lambda's on-demand market; a spot-only job is refused at submit, nothing stored."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlmodel import select

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdalabs"))
from fake_lambda import KEY, FakeLambda

from gpuorch.errors import UserInputError
from gpuorch.store.models import Job
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.lambdalabs


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    f = FakeLambda().start()
    yield f
    f.stop()


def config(fake: FakeLambda) -> dict:
    return {"providers": {"lambda": {"endpoint": fake.url}}, "metrics": {"enabled": False}}


def test_the_daemon_launches_on_lambda_on_demand(tmp_path: Path, fake: FakeLambda) -> None:
    with AssembledDaemon.start(tmp_path / "home", config(fake)) as d:
        job = d.submit({"name": "ft", "run": "true", "resources": {"gpu": "A10:1"}})
        d.until(lambda: any(a.instance_id for a in d.attempts(job)), timeout_s=60, what="a launch on lambda")
        [attempt] = [a for a in d.attempts(job) if a.instance_id]
        [inst] = fake.live()
        assert attempt.instance_id == inst.id and inst.instance_type == "gpu_1x_a10"
        assert not attempt.spot


def test_a_spot_only_job_is_refused_at_submit_and_nothing_is_stored(tmp_path: Path, fake: FakeLambda) -> None:
    with AssembledDaemon.start(tmp_path / "home", config(fake)) as d:
        with pytest.raises(UserInputError) as e:
            d.submit({"name": "cheap", "run": "true", "resources": {"gpu": "A10:1"}, "spot_policy": "spot"})
        assert "spot_policy" in str(e.value) and "lambda" in str(e.value) and "\n" not in str(e.value)
        with d.store.read() as s:
            assert s.exec(select(Job)).all() == []
    assert fake.launches == []

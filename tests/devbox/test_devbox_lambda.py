"""Idle stop of a dev box on Lambda (issue 35 item 4), through the assembled daemon and the fake
Lambda API (tests/lambdalabs/fake_lambda.py), the box's agent played (tests/kit/volume_agents.py).

Lambda cannot stop an instance: it bills until it is terminated. Idle stop therefore terminates
the box's instance (as it does everywhere: gpuorch stops no instance) and keeps the job's volume,
on Lambda a persistent filesystem given at launch; ``gpuorch dev NAME`` again launches a new
instance that mounts that same filesystem, and what the first box wrote is there. The
filesystem goes only when the box ends (cancelled)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuorch.devbox.boxes import BoxRequest, start
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from tests.kit.volume_agents import VolumeAgent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdalabs"))
from fake_lambda import KEY, FakeLambda

pytestmark = [pytest.mark.lambdalabs, pytest.mark.timeout(300)]
WRITTEN = b"step 300 written by attempt 1\n"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeLambda]:
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no real ~/.lambda_cloud is read
    f = FakeLambda(boot_s=0.0).start()
    yield f
    f.stop()


class Box(VolumeAgent):
    """The box's agent: writes on its volume when it starts (``VolumeAgent``), then reports as the
    keepalive does, idle for an hour (``idle``) or in use."""

    def __init__(self, instance_id: str, fake: FakeLambda, idle: bool) -> None:
        super().__init__(instance_id, fake.read, fake.write)
        self.idle = idle

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        if self.started is None:
            return b"", offset
        report = {"devbox_at": time.time(), "gpu_util": 0, "ssh_sessions": 0 if self.idle else 1,
                  "idle_s": 3600 if self.idle else 0}
        data = (json.dumps(report) + "\n").encode()[offset:offset + limit]
        return data, offset + len(data)


def test_idle_stop_on_lambda_terminates_the_box_and_keeps_its_filesystem_for_the_next(tmp_path, fake, monkeypatch):
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"lambda": {"endpoint": fake.url}}}) as d:
        boxes: dict[str, Box] = {}
        monkeypatch.setattr(d.adapter("lambda"), "runner",
                            lambda inst: boxes.setdefault(inst.id, Box(inst.id, fake, idle=not boxes)))
        request = BoxRequest("nb", gpu="A10:1", volume="20GB", idle_stop="30m", providers=("lambda",))
        job = d.submit(request.spec())
        first = d.until(lambda: next((b for b in boxes.values() if b.started), None), timeout_s=60,
                        what="the first box to start")
        [fs] = fake.filesystems.values()
        assert fs.files == {"state": WRITTEN} and fake.launches[0]["file_system_names"] == [fs.name]

        d.until(lambda: d.status(job) == JobStatus.HELD, timeout_s=60, what="the idle stop")
        assert d.job(job).message.startswith("idle stop: ") and "volume kept" in d.job(job).message
        [a1] = d.attempts(job)
        assert a1.reason == TerminationReason.HELD
        # terminated: Lambda has no stop, and an instance bills until it is terminated
        assert first.instance_id not in [i.id for i in fake.live()]
        assert ("POST", "/instance-operations/terminate") in fake.requests
        assert not [p for _, p in fake.requests if "stop" in p.rsplit("/", 1)[-1]]
        for _ in range(3):  # held: the filesystem stays, with what the box wrote
            d.run_pass()
        assert list(fake.filesystems.values()) == [fs] and fs.files == {"state": WRITTEN}
        assert d.job(job).volume_id is not None

        answer = start(d.service, BoxRequest("nb"), d.rec.clock.now())  # what `gpuorch dev nb` does
        assert (answer["started"], answer["id"]) == ("again", job)
        second = d.until(lambda: next((b for i, b in boxes.items() if b.started and i != first.instance_id), None),
                         timeout_s=60, what="the box again, on a new instance")
        assert second.found == WRITTEN  # the first box's file, on the same filesystem
        assert fake.launches[-1]["file_system_names"] == [fs.name] and list(fake.filesystems.values()) == [fs]
        d.until(lambda: d.status(job) == JobStatus.RUNNING, timeout_s=60, what="the box running again")

        d.service.cancel("nb")
        assert d.until_terminal(job, timeout_s=60).status == JobStatus.CANCELLED
        d.until(lambda: not fake.filesystems, timeout_s=60, what="the box's filesystem deleted once it ended")

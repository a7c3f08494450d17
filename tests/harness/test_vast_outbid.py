"""An interruptible Vast job outbid mid-run, through the assembled daemon: the config names the
``vast`` provider and the fake Vast API on 127.0.0.1 (``tests/vast/fake_vast.py``), the adapter is
built from it by its entry point with the key from ``VAST_API_KEY``, as ``gpuorch daemon`` builds it.

The fake rents no machine, so the instance side is played by the real agent as local processes:
the adapter's ``runner`` factory hands out a ``LocalRunner`` per Vast instance (a local instance
directory), and an outbid both pauses the fake's instance (``actual_status`` stopped, intent
running) and kills that directory's processes, as Vast pauses the container. The daemon must read
the pause as a preemption (dated), destroy the paused instance (it would bill storage), rent again
and resume the job from its checkpoint.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.provider.localdir import InstanceDir
from gpuorch.provider.localdir.instances import Meta
from gpuorch.provider.localdir.runner import LocalRunner
from gpuorch.provider.port import Instance, InstanceState, Offer
from gpuorch.store.models import Checkpoint, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vast"))
from fake_vast import KEY, FakeVastServer, market

pytestmark = [pytest.mark.vast, pytest.mark.timeout(300)]

JOB = """set -e
if [ -n "${GPUORCH_RESUMED_FROM:-}" ]; then
  cat "$GPUORCH_CHECKPOINT_DIR/$GPUORCH_RESUMED_FROM/state" > resumed.txt
  exit 0
fi
mkdir -p "$GPUORCH_CHECKPOINT_DIR/step-1"
echo "step 1 of attempt $GPUORCH_ATTEMPT" > "$GPUORCH_CHECKPOINT_DIR/step-1/state"
echo '{"step": 1}' > "$GPUORCH_CHECKPOINT_DIR/step-1/COMPLETE"
sleep 600
"""


def test_an_outbid_interruptible_job_is_preempted_destroyed_and_resumed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", KEY)
    server = FakeVastServer()
    fake = server.fake
    fake.add(*market())
    machines = tmp_path / "machines"
    machines.mkdir()
    try:
        config = {"providers": {"vast": {"server_url": fake.url}}}
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            vast = d.adapter("vast")
            assert type(vast).__name__ == "VastProvider"
            runners: dict[str, LocalRunner] = {}

            def machine(instance: Instance) -> LocalRunner:
                if instance.id not in runners:  # the container Vast started, as a local instance directory
                    now = utcnow()
                    offer = Offer(provider="vast", region=instance.region, zone=instance.zone,
                                  instance_type=instance.instance_type, gpu="RTX4090", gpu_count=1,
                                  gpu_memory_gib=24, price_per_hour=0.5)
                    InstanceDir(machines / instance.id).create(Meta(
                        id=instance.id, client_token=fake.instances[int(instance.id)]["label"], tags=instance.tags,
                        offer=offer, spot=instance.spot, state=InstanceState.RUNNING, created_at=now, ready_at=now))
                    runners[instance.id] = LocalRunner(machines / instance.id)
                return runners[instance.id]

            monkeypatch.setattr(vast, "runner", machine)  # the instance side only
            job = d.submit({"name": "lora", "run": JOB, "resources": {"gpu": "RTX4090:1"}, "spot_policy": "spot",
                            "providers": ["vast"], "retry": {"max_preemptions": 2},
                            "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "1s"}})

            def first_checkpoint() -> Any:
                with d.store.read() as s:
                    uploaded = s.exec(select(Checkpoint.name).where(Checkpoint.job_id == job)).all()
                return d.attempts(job)[0] if "step-1" in uploaded else None

            a1 = d.until(first_checkpoint, timeout_s=120, what="the first attempt's checkpoint upload")
            row = fake.instances[int(a1.instance_id)]
            assert row["is_bid"] and row["label"].endswith(f"-{job}-1")

            fake.outbid(a1.instance_id)  # a higher bid takes the machine: Vast pauses the container
            InstanceDir(machines / a1.instance_id).end(InstanceState.PREEMPTED, "outbid")
            done = d.until_terminal(job, timeout_s=180)
            assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
            rows = d.attempts(job)
            assert [a.reason for a in rows] == [TerminationReason.PREEMPTED, TerminationReason.SUCCEEDED]
            assert rows[0].ended_at is not None and rows[1].instance_id != a1.instance_id
            resumed = machines / rows[1].instance_id / "run" / "work" / "resumed.txt"
            assert resumed.read_text() == "step 1 of attempt 1\n"  # resumed from attempt 1's checkpoint
            # The paused instance was destroyed (storage stops billing); nothing of the job is left.
            d.until(lambda: not fake.instances, timeout_s=60, what="every instance destroyed")
    finally:
        server.close()

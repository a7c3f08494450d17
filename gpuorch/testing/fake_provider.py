"""FakeProvider: a deterministic in-memory cloud for the core's tests and the contract suite.

Time comes from a FakeClock. Knobs: capacity per (zone, instance type, market), errors queued
for the next calls of a method, a seeded share of failing calls (``faults``, a FaultPlan),
preemptions with a notice, instances that vanish, spot prices that move (``set_spot_price``),
volume devices slow to show up (``volume_device_delay_s``).
Every call is recorded in ``calls``. Its runner, ``FakeRunner`` (``fakejob.py``), plays a job
whose progress is a function of the clock (``FakeJobScript``).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from gpuorch.agent.protocol import AgentConfig
from gpuorch.clock import FakeClock
from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, TransientError
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import (
    TAG_JOB,
    TAG_MANAGED,
    TAG_OWNER,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Volume,
)
from gpuorch.runners.port import Runner
from gpuorch.testing.fake_job import FakeJobScript, FakeRunner, _Ckpt, _FakeAgent, _FakeInstance
from gpuorch.testing.faults import FaultPlan

T = TypeVar("T")

__all__ = ["FakeJobScript", "FakeProvider", "FakeRunner", "default_offers"]


def default_offers(provider: str = "fake") -> list[Offer]:
    def offer(region: str, zone: str, itype: str, gpu: str, mem: float, od: float, spot: float | None) -> Offer:
        return Offer(provider=provider, region=region, zone=zone, instance_type=itype, gpu=gpu, gpu_count=1,
                     gpu_memory_gib=mem, vcpus=8, memory_gib=64, price_per_hour=od, spot_price_per_hour=spot,
                     billing_granularity_s=1, min_billing_s=60)

    return [
        offer("r1", "r1-a", "gpu.a100", "A100-80GB", 80, 4.0, 1.2),
        offer("r1", "r1-b", "gpu.a100", "A100-80GB", 80, 4.0, 1.3),
        offer("r2", "r2-a", "gpu.a100", "A100-80GB", 80, 4.2, 1.5),
        offer("r1", "r1-a", "gpu.t4", "T4", 16, 0.5, 0.2),
    ]


class FakeProvider(Provider):
    # Its fake agents answer from memory: readable after the instance ended, never blocking.
    capabilities = Capabilities(runner_outlives_instance=True, runners_may_block=False)

    def __init__(self, clock: FakeClock | None = None, offers: list[Offer] | None = None, *, name: str = "fake",
                 boot_s: float = 0.0, script: FakeJobScript | None = None, faults: FaultPlan | None = None) -> None:
        self.name = name
        self.clock = clock or FakeClock()
        self._offers = offers if offers is not None else default_offers(name)
        self.boot_s = boot_s
        self.script = script or FakeJobScript()
        self.scripts: dict[str, FakeJobScript] = {}  # per job name
        self.calls: list[tuple[object, ...]] = []
        self.unavailable: set[tuple[str, str, bool]] = set()  # (zone, instance type, spot)
        self._errors: dict[str, list[Exception]] = defaultdict(list)
        self._instances: dict[str, _FakeInstance] = {}
        self._vanished: dict[str, _FakeInstance] = {}  # still known to their fake agents
        self._agents: dict[str, _FakeAgent] = {}
        self.volumes: dict[str, Volume] = {}  # SupportsVolumes, in memory
        # A volume's device shows up on the instance this long after its first attach there: until
        # then the runner's start raises VolumeNotReady, as the SSH runner's mount step does.
        # A final mount failure: ``fail_next("runner.mount", VolumeMountFailed(...))``.
        self.volume_device_delay_s = 0.0
        self.volume_attached_at: dict[tuple[str, str], datetime] = {}  # (volume, instance) -> first attach
        self._seq = 0
        self._launching = threading.Lock()
        self.faults = faults

    # -- knobs ---------------------------------------------------------------------------
    def fail_next(self, method: str, error: Exception, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` raise ``error`` (after being recorded)."""
        self._errors[method].extend([error] * times)

    def set_capacity(self, zone: str, instance_type: str, spot: bool, available: bool) -> None:
        (self.unavailable.discard if available else self.unavailable.add)((zone, instance_type, spot))

    def inject_preemption(self, instance_id: str, notice_s: float) -> None:
        """Announce now that the instance dies in ``notice_s`` seconds; 0: reclaimed now, unannounced."""
        rec = self._instances[instance_id]
        now = self.clock.now()
        rec.notice_at = now if notice_s > 0 else None
        rec.instance = rec.instance.model_copy(update={"preemption_deadline": now + timedelta(seconds=notice_s)})

    def set_spot_price(self, zone: str, instance_type: str, price: float) -> None:
        """The spot market of (zone, instance type) moves to ``price`` USD/h from now on."""
        self._offers = [o.model_copy(update={"spot_price_per_hour": price})
                        if (o.zone, o.instance_type) == (zone, instance_type) else o for o in self._offers]

    def vanish(self, instance_id: str) -> None:
        """The instance disappears without a notice (hardware failure, preemption without warning)."""
        rec = self._instances.pop(instance_id)
        rec.killed_at = self.clock.now()
        self._vanished[instance_id] = rec

    def live_instances(self) -> list[Instance]:
        return [i for i in self._list() if i.state.alive]

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c[0] == method)

    # -- the port ------------------------------------------------------------------------
    def _record(self, method: str, *args: object) -> None:
        self.calls.append((method, *args))
        if self._errors.get(method):
            raise self._errors[method].pop(0)

    def _faulty(self, method: str, fn: Callable[..., T], *args: object) -> T:
        return self.faults.call(method, fn, *args) if self.faults else fn(*args)

    def offers(self) -> list[Offer]:
        self._record("offers")
        return self._faulty("offers", lambda: list(self._offers))

    def launch(self, request: LaunchRequest) -> Instance:
        self._record("launch", request.client_token)
        return self._faulty("launch", self._launch, request)

    def _launch(self, request: LaunchRequest) -> Instance:
        with self._launching:  # the launch pool's workers: one token's look-then-create at a time
            return self._launch_locked(request)

    def _launch_locked(self, request: LaunchRequest) -> Instance:
        for rec in list(self._instances.values()):
            if rec.instance.tags.get("client_token") == request.client_token:
                return self._settle(rec)
        o = request.offer
        if (o.zone, o.instance_type, request.spot) in self.unavailable:
            raise NoCapacityError(f"no capacity for {o.instance_type} in {o.zone}", code="InsufficientCapacity")
        self._seq += 1
        inst = Instance(id=f"{self.name}-{self._seq}", provider=self.name, region=o.region, zone=o.zone,
                        instance_type=o.instance_type, spot=request.spot, state=InstanceState.PENDING,
                        tags={**request.tags, "client_token": request.client_token}, created_at=self.clock.now(),
                        host="127.0.0.1")
        rec = _FakeInstance(inst)
        self._instances[inst.id] = rec
        return self._settle(rec)

    def _settle(self, rec: _FakeInstance) -> Instance:
        """Advance an instance's state to what the clock says."""
        inst, now = rec.instance, self.clock.now()
        if inst.state == InstanceState.PENDING and now >= inst.created_at + timedelta(seconds=self.boot_s):  # type: ignore[operator]
            inst = inst.model_copy(update={"state": InstanceState.RUNNING})
        deadline = inst.preemption_deadline
        if inst.state.alive and deadline is not None and now >= deadline:
            rec.killed_at = deadline
            inst = inst.model_copy(update={"state": InstanceState.PREEMPTED, "state_reason": "spot-interruption",
                                           "ended_at": deadline})
        rec.instance = inst
        return inst

    def get(self, instance_id: str) -> Instance:
        self._record("get", instance_id)
        return self._faulty("get", self._peek, instance_id)

    def _peek(self, instance_id: str) -> Instance:
        rec = self._instances.get(instance_id)
        if rec is None:
            raise NotFoundError(f"instance {instance_id} not found")
        return self._settle(rec)

    def list_managed(self) -> list[Instance]:
        self._record("list_managed")
        return self._faulty("list_managed", self._list)

    def _list(self) -> list[Instance]:
        # a snapshot (one C call): a background launch may add an instance meanwhile
        return [self._settle(r) for r in list(self._instances.values())
                if r.instance.tags.get("gpuorch:managed") == "true"]

    def terminate(self, instance_id: str) -> None:
        self._record("terminate", instance_id)
        self._faulty("terminate", self._terminate, instance_id)

    def _terminate(self, instance_id: str) -> None:
        rec = self._instances.get(instance_id)
        if rec is None:
            return
        inst = self._settle(rec)
        if inst.state.alive:
            rec.killed_at = self.clock.now()
            rec.instance = inst.model_copy(update={"state": InstanceState.TERMINATED, "ended_at": rec.killed_at})

    def runner(self, instance: Instance) -> Runner:
        return FakeRunner(self, instance.id)

    # -- SupportsVolumes: zone-checked like EBS; a dead instance's volume is free again ---------
    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str],
                      disk_type: str | None = None) -> Volume:
        """A volume in ``zone`` carrying ``tags`` and ``gpuorch:managed``; idempotent by job and owner."""
        self._record("create_volume", zone, disk_type)
        for v in self.volumes.values():  # look before creating, as the clouds' adapters do
            if v.zone == zone and all(v.tags.get(k) == tags.get(k) for k in (TAG_JOB, TAG_OWNER)):
                return v
        self._seq += 1
        vol = Volume(id=f"{self.name}-vol-{self._seq}", provider=self.name, region=region, zone=zone,
                     size_gib=size_gib, tags={**tags, TAG_MANAGED: "true"})
        self.volumes[vol.id] = vol
        return vol

    def _holder(self, vol: Volume) -> str | None:
        rec = self._instances.get(vol.attached_to or "")
        return vol.attached_to if rec is not None and self._settle(rec).state.alive else None

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        """PermanentError ``InvalidVolume.ZoneMismatch`` across zones, TransientError ``VolumeInUse``
        if a live instance holds it; quiet if already attached to ``instance_id``."""
        self._record("attach_volume", volume_id, instance_id)
        vol, inst = self._volume(volume_id), self.get(instance_id)
        if vol.zone != inst.zone:
            raise PermanentError(f"volume {volume_id} is in {vol.zone}, instance {instance_id} in {inst.zone}",
                                 code="InvalidVolume.ZoneMismatch")
        holder = self._holder(vol)
        if holder not in (None, instance_id):
            raise TransientError(f"volume {volume_id} is attached to {holder}", code="VolumeInUse")
        self.volumes[volume_id] = vol.model_copy(update={"attached_to": instance_id})
        self.volume_attached_at.setdefault((volume_id, instance_id), self.clock.now())

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        self._record("detach_volume", volume_id, instance_id)
        vol = self.volumes.get(volume_id)
        if vol is not None and vol.attached_to == instance_id:
            self.volumes[volume_id] = vol.model_copy(update={"attached_to": None})

    def delete_volume(self, volume_id: str) -> None:
        """Quiet if gone; TransientError ``VolumeInUse`` while a live instance holds it."""
        self._record("delete_volume", volume_id)
        vol = self.volumes.get(volume_id)
        if vol is None:
            return
        if self._holder(vol) is not None:
            raise TransientError(f"volume {volume_id} is attached to {vol.attached_to}", code="VolumeInUse")
        del self.volumes[volume_id]

    def list_volumes(self) -> list[Volume]:
        self._record("list_volumes")
        return list(self.volumes.values())

    def _volume(self, volume_id: str) -> Volume:
        if volume_id not in self.volumes:
            raise NotFoundError(f"volume {volume_id} not found")
        return self.volumes[volume_id]

    # -- the fake agents' shared world ---------------------------------------------------------
    def _agent_of(self, job_id: int, attempt: int) -> _FakeAgent | None:
        for a in self._agents.values():
            if a.config.job_id == job_id and a.config.attempt == attempt:
                return a
        return None

    def _latest_checkpoint(self, config: AgentConfig, at: datetime, exclude: _FakeAgent) -> _Ckpt | None:
        if not config.checkpoint_url:
            return None
        url = config.checkpoint_url
        found = [c for a in self._agents.values() if a is not exclude and a.config.checkpoint_url == url
                 and a.started <= at for c in a.checkpoints() if c.at <= at]
        return max(found, key=lambda c: (c.at, c.progress)) if found else None


class RecyclingRunner(FakeRunner):
    """The fake runner able to start another attempt on its instance, as the local, sim and SSH
    runners are (``reconciler/apply/warm.Recycles``): without it no instance is ever kept warm.
    The finished agent is set aside, its checkpoints still readable."""

    def recycle(self) -> None:
        agents = self.provider._agents
        if (old := agents.pop(self.instance_id, None)) is not None:
            agents[f"{self.instance_id}/{old.config.job_id}.{old.config.attempt}"] = old


class WarmCapableProvider(FakeProvider):
    """The FakeProvider whose instances can be kept warm (:class:`RecyclingRunner`)."""

    def runner(self, instance: Instance) -> Runner:
        return RecyclingRunner(self, instance.id)

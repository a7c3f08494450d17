"""``SimProvider``: a multi-region spot market replaying real availability traces, fast.

Registered as entry point ``sim`` in group ``gpuorch.providers``. Each zone replays its trace
(spot available or not, tick by tick) and price series; on-demand is always available. A spot
launch into a zone whose trace reads 0 fails with ``NoCapacityError``; a spot instance is
reclaimed at its zone's next drop, after a notice of the zone's flavour (AWS 120 s, GCP and
Azure 30 s, or none). The market runs ``time_scale`` times faster than the wall clock, so a
night of traces replays in a minute (``market.py``).

Instances are local instances (``gpuorch.provider.localdir``: a directory and process groups
under ``<home>/sim/instances``) run by the local runner, so each one runs the real agent and the
real job; a reclaim really kills them. The cloud process (``cloud.py``) carries reclaims out on
time whether or not a daemon runs. ``faults`` makes a seeded share of the port's calls fail.
Volumes are directories under ``<home>/sim/volumes``, attached to one live instance of their zone
at a time; the job sees its volume's directory as ``GPUORCH_VOLUME_DIR`` (``volumes.py``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from gpuorch.agent.protocol import JOB_LOG, METRICS_FILE, STATUS_FILE, AgentStatus
from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, UserInputError, field_path
from gpuorch.provider import (
    TAG_MANAGED,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Runner,
    RunnerUnavailable,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.localdir import REASON_TERMINATED, InstanceDir, LocalRunner, Meta, capacity, instance_id_for
from gpuorch.provider.localdir.watch import RunDirWatch
from gpuorch.provider.options import fix_hint

from .cloud import (
    MARKET_FILE,
    TAG_LIFETIME,
    Instances,
    Scan,
    SimInstanceDir,
    ensure_cloud,
    make_change_log,
    next_event,
    open_market,
    stop_cloud,
)
from .market import PROVIDER, SimClock, SimMarket, SimOptions, resolve
from .runner import ExternalAgentRunner, SimRunner
from .volumes import SimVolumePort, SimVolumes

if TYPE_CHECKING:  # the doctor's and the fault plan's modules load only when used (a daemon's steady memory)
    from gpuorch.doctor.findings import Finding
    from gpuorch.testing.faults import FaultPlan

T = TypeVar("T")

MAX_RUNNERS = 100_000  # runners kept; the cache starts over beyond
CLOUD_CHECK_S = 1.0  # a launch looks for the cloud process at most this often (SimProvider._ensure_cloud)
FULL_LIST_S = 60.0  # a listing reads every record at least this often (one written around the change log)
_ID = re.compile(r"sim-[A-Za-z0-9][A-Za-z0-9_.-]{0,120}")


class SimProvider(SimVolumePort, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; also ``SupportsPreemptionInjection`` and
    ``SupportsVolumes`` (directories under ``<home>/volumes``: ``volumes.py``)."""

    name = PROVIDER
    # Run dirs stay after a reclaim (the agent's last word is readable); its runner and its
    # launches read and write local files; ``agent_statuses`` reads many agents at once.
    capabilities = Capabilities(runner_outlives_instance=True, runners_may_block=False, launches_may_block=False,
                                agent_statuses=True)

    def __init__(self, home: Path, options: SimOptions) -> None:
        self.home = Path(home).expanduser().resolve()
        self.instances_dir = self.home / "instances"
        self.instances_dir.mkdir(parents=True, exist_ok=True)
        self.options = options
        self.market: SimMarket = open_market(self.home, options)
        # Seeded, and salted with the pid so that each daemon life draws its own sequence.
        self.faults: FaultPlan | None = None
        if options.faults:
            from gpuorch.testing.faults import FaultPlan

            self.faults = FaultPlan.from_options(options.faults, seed_salt=os.getpid())
        make_change_log(self.instances_dir)
        self._instances = Instances(self.instances_dir, self.market)
        self.sim_volumes = SimVolumes(self.home / "volumes", lambda iid: self._instance(self._dir(iid), time.time()))
        self._instance_cache: dict[str, tuple[Meta, InstanceState, Instance]] = {}
        # The last listing (list_managed): by name, the instance (None: not a managed one), the
        # list handed out, and what to read next (records that change unwritten, a boot, a
        # reclaim, a lifetime, are due at _Seen.due).
        self._listed: dict[str, Instance | None] = {}
        self._listing: list[Instance] = []
        self._scan = Scan(self._instances, FULL_LIST_S)
        self._cloud_checked_at: float | None = None  # monotonic time of the last ensure_cloud
        self._runners: dict[str, LocalRunner] = {}
        self._watch: RunDirWatch | None = None  # agent_statuses' change signal
        self._answers: dict[str, tuple[Runner, AgentStatus | None]] = {}  # its last answers
        self._catalog = _load_catalog(options.catalog)  # extra offers, read once
        self._sold = {(o.zone, o.instance_type) for o in self._catalog}
        self._capacity_file = str(self.home / capacity.CAPACITY_FILE)
        self._capacity: tuple[tuple[int, int, int] | None, list[str]] = (None, [])  # (file key, entries): _unavailable

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """The market's offers now, read from its traces without starting its cloud process or
        writing its state (``submit``'s fit check, ``gpuorch plan`` / ``offers``): at the running
        replay's time when ``home/sim`` has one for these options, else at the replay's start."""
        opts = cls.from_config_options(options)
        now = time.time()
        origin = now
        try:
            saved = json.loads((Path(home) / "sim" / MARKET_FILE).read_text())
            if saved.get("options") == opts.model_dump(mode="json"):
                origin = float(saved["origin"])
        except (OSError, ValueError, KeyError):
            pass
        return SimMarket(opts, SimClock(origin, opts.start_s, opts.time_scale)).offers(now)

    @classmethod
    def from_config_options(cls, options: dict[str, Any]) -> SimOptions:
        try:
            opts = SimOptions.model_validate(options or {})
        except ValidationError as e:
            err = e.errors()[0]
            raise UserInputError(f"providers.sim.{field_path(err['loc'])}: {fix_hint(err) or err['msg']}") from None
        return opts.model_copy(update={"traces": resolve(opts.traces), "prices": resolve(opts.prices)})

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> SimProvider:
        """Build from the daemon config's ``providers.sim`` options (``SimOptions``); state in
        ``home/sim``. Raises UserInputError naming the option for anything invalid."""
        opts = cls.from_config_options(options)
        try:
            if opts.faults:
                from gpuorch.testing.faults import FaultPlan

                FaultPlan.from_options(opts.faults)
        except (ValueError, TypeError) as e:
            raise UserInputError(f"providers.sim.{e}") from None
        return cls(Path(home) / "sim", opts)

    # -- helpers -----------------------------------------------------------------------------
    def _faulty(self, method: str, fn: Callable[..., T], *args: Any) -> T:
        return self.faults.call(method, fn, *args) if self.faults else fn(*args)

    def _dir(self, instance_id: str) -> InstanceDir:
        if not _ID.fullmatch(instance_id):  # also keeps "../x" from reaching the filesystem
            raise NotFoundError(f"sim instance {instance_id!r} not found")
        return SimInstanceDir(self.instances_dir / instance_id)

    def _instance(self, inst: InstanceDir, now: float) -> Instance:
        """The instance as the market has it now; Instance objects are reused while unchanged."""
        meta, seen = self._instances.settled(inst, now)
        cached = self._instance_cache.get(inst.id)
        if cached is not None and cached[0] is seen.meta and cached[1] == meta.state:  # the same record read
            return cached[2]
        instance = meta.to_instance()
        self._instance_cache[inst.id] = (seen.meta, meta.state, instance)
        return instance

    # -- the port ----------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """One offer per zone; spot prices from the zone's series at the market's time; then the
        ``catalog`` option's offers."""
        return self._faulty("offers", lambda: self.market.offers(time.time()) + self._catalog)

    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``. PermanentError for an offer this market does not sell;
        NoCapacityError for spot in a zone whose trace reads 0 now."""
        return self._faulty("launch", self._launch, request)

    def _launch(self, request: LaunchRequest) -> Instance:
        """Idempotent by client token: an instance launched before is the answer, whatever the market
        says now; looked for only when this launch would fail or finds its id taken (``create``)."""
        inst = SimInstanceDir(self.instances_dir / instance_id_for(request.client_token, PROVIDER))
        now = time.time()
        try:
            self._sells(request, now)
        except (PermanentError, NoCapacityError) as refused:
            try:
                return self._instance(inst, now)  # launched before
            except NotFoundError:
                raise refused from None
        o = request.offer
        tags = dict(request.tags)
        if request.max_lifetime_s is not None:
            tags[TAG_LIFETIME] = f"{request.max_lifetime_s:g}"
        created = datetime.fromtimestamp(now, UTC)
        ready = created + timedelta(seconds=self.market.boot_wall_s(request.attempt))
        meta = Meta(id=inst.id, client_token=request.client_token, tags=tags, offer=o, spot=request.spot,
                    state=InstanceState.PENDING, created_at=created, ready_at=ready)
        made = inst.create(meta)  # False: launched before (or by a concurrent call): its record is the answer
        self._ensure_cloud()
        now = time.time()
        event = next_event(meta, self._instances.reclaim_of(meta))
        if made and (event is None or now < event):  # the record just written, nothing due: not read back
            return meta.to_instance(InstanceState.RUNNING if now >= meta.ready_at.timestamp() else None)
        return self._instance(inst, now)

    def _sells(self, request: LaunchRequest, now: float) -> None:
        """PermanentError for an offer not sold here; NoCapacityError for one with none now (trace, knob)."""
        o = request.offer
        listed = o.provider == PROVIDER and (o.zone, o.instance_type) in self._sold  # the catalog option's
        if not listed and (o.provider != PROVIDER or o.zone not in self.market.zones
                           or o.instance_type != self.options.instance_type):
            raise PermanentError(f"{o.instance_type} in {o.zone} is not sold by the sim market", code="InvalidOffer")
        if request.spot and not listed and not self.market.spot_available(o.zone, now):
            raise NoCapacityError(f"no spot capacity for {o.instance_type} in {o.zone} (trace)",
                                  code="InsufficientInstanceCapacity")
        if self._unavailable(o.zone, o.instance_type, request.spot):
            raise NoCapacityError(f"no {capacity.market(request.spot)} capacity for {o.instance_type} in {o.zone}",
                                  code="InsufficientInstanceCapacity")

    def _unavailable(self, zone: str, instance_type: str, spot: bool) -> bool:
        """``capacity.is_unavailable``, its file parsed again only when it changed: one ``stat`` a
        launch while its (inode, mtime, size) is the same and it was written over a second ago
        (a rewrite within the file system's timestamp tick would keep the key), not a read and
        a parse (a tenth of a sim launch in a queue drain)."""
        try:
            st = os.stat(self._capacity_file)
            key: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            settled = time.time() - st.st_mtime > 1.0
        except OSError:
            key, settled = None, True
        if key != self._capacity[0] or not settled:
            self._capacity = (key, capacity.read_unavailable(self.home) if key is not None else [])
        wanted = capacity.capacity_key(zone, instance_type, spot)
        return any(fnmatchcase(wanted, pattern) for pattern in self._capacity[1])

    def _ensure_cloud(self) -> None:
        """``ensure_cloud``, at most once a second from this provider (a lock file's open and
        ``flock`` a launch, before): the cloud process, started, runs until idle; and what it
        does late the listing does too (it settles what is due)."""
        now = time.monotonic()
        if self._cloud_checked_at is None or not 0 <= now - self._cloud_checked_at < CLOUD_CHECK_S:
            ensure_cloud(self.home)
            self._cloud_checked_at = now

    def get(self, instance_id: str) -> Instance:
        """Raises NotFoundError for an id never launched here. Settles what is due."""
        return self._faulty("get", lambda: self._instance(self._dir(instance_id), time.time()))

    def list_managed(self) -> list[Instance]:
        """Every instance with the managed tag, ended ones included; settles what is due. Only
        records written since the last call (the change log: ``Instances.changes``) or due to
        change unwritten (a boot, a reclaim) are looked at again, and every record at least
        every ``FULL_LIST_S``; the same list object while nothing changed."""
        return self._faulty("list_managed", self._list)

    def _list(self) -> list[Instance]:
        now = time.time()
        names = self._scan.take(now)
        if names is None:
            self._listed = {}
            self._instances.rotate_log()  # before the records are read (see there)
            dirs = self._instances.all()
        elif not names:
            return list(self._listing)
        else:
            dirs = self._instances.named({n for n in names if _ID.fullmatch(n)})
        for inst in dirs:
            try:
                instance = self._instance(inst, now)
            except (NotFoundError, ValueError):  # being created, or not a record of ours
                self._listed.pop(inst.id, None)
                continue
            self._listed[inst.id] = instance if instance.tags.get(TAG_MANAGED) == "true" else None
            if (seen := self._instances.seen(inst.id)) is not None:
                self._scan.due_at(seen.due(), inst.id)
        self._listing = [inst for inst in self._listed.values() if inst is not None]  # in the order first listed
        return list(self._listing)

    def terminate(self, instance_id: str) -> None:
        """Kill the instance's processes and mark it TERMINATED. Quiet if gone or unknown."""
        self._faulty("terminate", self._terminate, instance_id)

    def _terminate(self, instance_id: str) -> None:
        try:
            self._dir(instance_id).end(InstanceState.TERMINATED, REASON_TERMINATED)
        except NotFoundError:
            return

    def runner(self, instance: Instance) -> Runner:
        """The instance's runner; one per instance, kept (it caches the agent's parsed status)."""
        return self._runner(instance)

    def _runner(self, instance: Instance) -> LocalRunner:
        runner = self._runners.get(instance.id)
        if runner is None:
            inst = self._dir(instance.id)
            path = inst.path
            if self.options.agents == "external":  # its state as this provider settles it: a stat
                runner = ExternalAgentRunner(path, self.options.notice_poll_s,
                                             state=lambda: self._instances.settled(inst, time.time(), False)[0].state)
            else:
                runner = SimRunner(path, self.sim_volumes, notice_poll_s=self.options.notice_poll_s,
                                   final_checkpoint_grace_s=self.options.final_checkpoint_grace_s)
            if len(self._runners) >= MAX_RUNNERS:
                self._runners.clear()
            self._runners[instance.id] = runner
        return runner

    # -- capabilities and knobs --------------------------------------------------------------
    def agent_statuses(self, instances: Sequence[Instance]) -> dict[str, tuple[Runner, AgentStatus | None] | None]:
        """The agents' statuses of instances this pass's ``list_managed`` returned, in one call
        (as a cloud lists its instances in one): by instance id, (runner, status), or None for
        one whose runner cannot answer. A listed instance's record was just read, so each costs
        one ``stat`` of its ``status.json`` while that is unchanged, and nothing at all while no
        file of its agent changed since the last call (``RunDirWatch``): then the answer is the
        very object of that call, which tells the caller that nothing is new in the agent's
        status, log or metrics (``SupportsAgentStatuses``)."""
        if self._watch is None:  # made at the first call: only a daemon's passes ask (an inotify instance each)
            self._watch = RunDirWatch((STATUS_FILE, JOB_LOG, METRICS_FILE))
        watch, last = self._watch, self._answers
        self._answers = {}  # until this call is through: events drained now are in no answer kept
        changed = watch.changes()
        out: dict[str, tuple[Runner, AgentStatus | None] | None] = {}
        for inst in instances:
            iid = inst.id
            if changed is not None and iid not in changed and (prev := last.get(iid)) is not None \
                    and watch.watching(iid):
                out[iid] = prev
                continue
            try:
                runner = self._runner(inst)
                watch.add(iid, str(runner.rundir))  # before the read: a write after it is an event
                out[iid] = (runner, runner.listed_status())
            except (NotFoundError, RunnerUnavailable, OSError):
                out[iid] = None
        watch.keep(set(out))
        self._answers = {k: v for k, v in out.items() if v is not None}
        return out

    def inject_preemption(self, instance_id: str, notice_s: float) -> None:
        """Announce a reclaim ``notice_s`` wall seconds from now, besides the trace's; the
        cloud process carries it out. No-op for an ended instance."""
        inst = self._dir(instance_id)
        if not inst.meta_file.exists():
            raise NotFoundError(f"sim instance {instance_id!r} not found")
        inst.announce(datetime.now(UTC) + timedelta(seconds=notice_s))
        ensure_cloud(self.home)
        self._cloud_checked_at = time.monotonic()

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: a simulated market needs no credentials, only its state directory."""
        from gpuorch.doctor.findings import Finding
        from gpuorch.provider.selfcheck import state_dir_finding

        check = f"provider {self.name}"
        if (unwritable := state_dir_finding(check, self.instances_dir, self.home)) is not None:
            return [unwritable]
        return [Finding.ok(check, f"no credentials needed (a simulated market); state under {self.home}")]

    def set_capacity(self, zone: str, instance_type: str, spot: bool, available: bool) -> None:
        """Take a market out (or give it back) on top of its trace: the local capacity knob,
        ``<home>/sim/capacity.json``. Same signature as ``FakeProvider.set_capacity``."""
        capacity.set_available(self.home, zone, instance_type, spot, available)

    def stop_cloud(self) -> None:
        """Stop the cloud process (tests and benchmarks clean up with this)."""
        stop_cloud(self.home)
        self._cloud_checked_at = None  # the next launch starts one again

    @property
    def time_scale(self) -> float:
        """``gpuorch.clock.SimulatedMarket``: market seconds per wall second. The daemon's policy
        timers (back-offs, zone avoidance) for this provider run in market time."""
        return self.options.time_scale

    def sim_time(self, wall: float | None = None) -> float:
        """Seconds into the traces at ``wall`` (default: now)."""
        return self.market.clock.sim(time.time() if wall is None else wall)


def _load_catalog(path: str | None) -> list[Offer]:
    """The ``catalog`` option's offers, as the sim's (provider ``sim``). UserInputError naming
    the option for a file that cannot be read or parsed."""
    if path is None:
        return []
    try:
        rows = json.loads(Path(path).expanduser().read_text())
        return [Offer.model_validate({**row, "provider": PROVIDER}) for row in rows]
    except (OSError, ValueError, TypeError) as e:
        raise UserInputError(f"providers.sim.catalog: cannot read offers from {path} ({e}); give a JSON list "
                             "of offers") from None

"""``LocalProvider``: the embedded default provider; "instances" are directories on this host.

Each instance is ``<home>/instances/<id>/`` (``gpuorch.provider.localdir``, shared with ``sim``) whose agent and job run
as process groups of their own. No cloud account is needed, so ``make demo`` and the core's
end-to-end tests run anywhere; the simulated market (``market.py``) gives placement real choices,
the capacity knob (``localdir.capacity``) makes markets run out, and ``inject_preemption`` reclaims an
instance after a notice the way a spot market does.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuorch.agent.container import ContainerConfig
from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, UserInputError
from gpuorch.provider import (
    TAG_MANAGED,
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Runner,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.gang import launch_gang, master_port, node_requests
from gpuorch.provider.localdir import (
    REASON_TERMINATED,
    InstanceDir,
    LocalRunner,
    Meta,
    capacity,
    instance_id_for,
    spawn_detached,
)
from gpuorch.provider.localdir.isolation import private_home
from gpuorch.provider.options import fix_hint

from .gang import GangRunner, end_gang, gang_dirs, observe_gang
from .isolation import IsolatedRunner, Isolation, jobs_root, log
from .market import PROVIDER, catalog_offers, default_offers, host_offers

_ID = re.compile(r"local-[A-Za-z0-9][A-Za-z0-9_.-]{0,120}")
_OPTIONS = "boot_s, container, run_as, jobs_dir, python"


class LocalContainer(BaseModel):
    """``providers.local.container``: how this host runs a job's ``image:`` (docs/workloads.md)."""

    model_config = ConfigDict(extra="forbid")

    runtime: list[str] = Field(default_factory=list)  # argv prefix, e.g. [podman, --runtime, runc]
    run_args: list[str] = Field(default_factory=list)  # e.g. [--ulimit, nofile=1024:1024]
    gpus: Literal["auto", "all", "none"] = "auto"


class LocalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    boot_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    container: LocalContainer | None = None
    # Isolation (docs/providers.md, "Local provider isolation"): the user instances run as
    # (default for a root daemon: gpuorch-job), where their directories go, their interpreter.
    run_as: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$")
    jobs_dir: Path | None = None
    python: str | None = Field(default=None, min_length=1, pattern=r"^/")


class LocalProvider(Provider):
    """Contract: ``gpuorch.provider.port.Provider``; also ``SupportsPreemptionInjection`` and
    ``SupportsDoctor``."""

    name = PROVIDER
    # The run dir stays after the process groups are killed; its runner and its launches read and
    # write local files; images run through podman or docker on this host (providers.local.container);
    # gangs are instance directories, one instance to the daemon (gang.py).
    capabilities = Capabilities(runner_outlives_instance=True, runners_may_block=False, launches_may_block=False,
                                runs_containers=True, max_nodes=8)

    def __init__(self, home: Path, offers: list[Offer] | None = None, boot_s: float = 0.0,
                 container: ContainerConfig | None = None, isolation: Isolation | None = None) -> None:
        self.container = container  # the host's runtime for image jobs; None: the agent detects one
        self.home = Path(home).expanduser().resolve()
        # None (a provider built in code): instances run as the daemon's user, as before.
        self.isolation = isolation or Isolation(None, why_not="built without an isolation plan",
                                                fix="build the provider from the daemon's configuration")
        jobs = self.isolation.jobs_dir
        self.instances_dir = jobs_root(jobs) if jobs is not None else self.home / "instances"
        self.instances_dir.mkdir(parents=True, exist_ok=True)
        # Instances started before isolation moved them to ``jobs_dir`` stay found where they are.
        legacy = self.home / "instances"
        self.legacy_dir = legacy if legacy != self.instances_dir and legacy.is_dir() else None
        self.boot_s = boot_s
        # The default market is built lazily: detecting the host's GPUs runs nvidia-smi.
        self._offers = list(offers) if offers is not None else None

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """The simulated market, without probing the host's GPUs (`submit`'s quick fit check)."""
        return catalog_offers(options, home)

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> LocalProvider:
        """Build from the daemon config's ``providers.local`` options; state in ``home/local``.

        Options: ``boot_s`` (seconds an instance stays PENDING, default 0), ``container`` (``runtime``,
        ``run_args``, ``gpus``: how this host runs image jobs, docs/workloads.md). Raises UserInputError
        naming the option for anything else.
        """
        try:
            opts = LocalOptions.model_validate(options or {})
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            msg = fix_hint(err) or err["msg"]
            known = f"; known options: {_OPTIONS}" if err["type"] == "extra_forbidden" else ""
            raise UserInputError(f"providers.local.{where}: {msg}{known}") from None
        c = opts.container
        container = ContainerConfig(image="", runtime=c.runtime, run_args=c.run_args, gpus=c.gpus) if c else None
        local = Path(home).expanduser().resolve() / "local"
        isolation = Isolation.plan(opts.run_as, opts.jobs_dir, opts.python, local)
        if isolation.user is not None and private_home(local.parent):  # a job runs as another user
            log.warning("made %s 0700: jobs run as %s and must not read the daemon's state", local.parent,
                        isolation.user)
        return cls(local, boot_s=opts.boot_s, container=container, isolation=isolation)

    def _instance(self, instance_id: str) -> InstanceDir:
        if not _ID.fullmatch(instance_id):  # also keeps "../x" from reaching the filesystem
            raise NotFoundError(f"local instance {instance_id!r} not found")
        return self._dir_for(instance_id)

    def _dir_for(self, instance_id: str) -> InstanceDir:
        path = self.instances_dir / instance_id
        if self.legacy_dir is not None and not path.exists() and (self.legacy_dir / instance_id).exists():
            path = self.legacy_dir / instance_id
        return InstanceDir(path)

    # -- the port ----------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """The simulated market plus this host's GPUs, or the list given to the constructor."""
        if self._offers is None:
            self._offers = default_offers() + host_offers()
        return list(self._offers)

    def launch(self, request: LaunchRequest) -> Instance:
        """Create ``home/instances/<id>`` for the request's client token; see ``Provider.launch``.

        An instance that already exists for the token is returned as it is, even if its market
        has run out since. Raises PermanentError for an offer this provider does not sell, and
        NoCapacityError for a market the capacity knob marks unavailable.
        """
        if request.nodes > 1 and request.node == 0:  # a gang: all nodes or none; node 0 stands for it
            launch_gang(_Nodes(self), node_requests(request, request.nodes))
            return self.get(instance_id_for(request.client_token))
        return self._launch_one(request)

    def _launch_one(self, request: LaunchRequest) -> Instance:
        inst = self._dir_for(instance_id_for(request.client_token))
        try:
            return inst.observe().to_instance()
        except NotFoundError:
            pass
        offer = self._validate(request)
        run_as = self.isolation.identity(self.instances_dir)  # recorded: the instance keeps its user
        now = utcnow()
        meta = Meta(
            id=inst.id, client_token=request.client_token, tags=request.tags, offer=offer, spot=request.spot,
            state=InstanceState.PENDING, created_at=now, ready_at=now + timedelta(seconds=self.boot_s),
            run_as=run_as,
        )
        inst.create(meta)  # False: a concurrent launch with the same token won; report its instance
        return inst.observe().to_instance()

    def _validate(self, request: LaunchRequest) -> Offer:
        o = request.offer
        self.check_offer(o)
        if not any(x.zone == o.zone and x.instance_type == o.instance_type for x in self.offers()):
            raise PermanentError(f"{o.instance_type} is not sold in {o.zone}", code="InvalidInstanceType")
        if request.spot and o.spot_price_per_hour is None:
            raise PermanentError(f"{o.instance_type} in {o.zone} has no spot market", code="NoSpotMarket")
        if capacity.is_unavailable(self.home, o.zone, o.instance_type, request.spot):
            raise NoCapacityError(
                f"no {capacity.market(request.spot)} capacity for {o.instance_type} in {o.zone}",
                code="InsufficientInstanceCapacity",
            )
        return o

    def get(self, instance_id: str) -> Instance:
        """Raises NotFoundError for an id that was never launched here. Settles due preemptions
        (and a gang's one fate: ``gang.observe_gang``)."""
        inst = self._instance(instance_id)
        nodes = gang_dirs(inst.path.parent, inst.read())
        if nodes is not None:
            return observe_gang(nodes, utcnow()).to_instance()
        return inst.observe().to_instance()

    def list_managed(self) -> list[Instance]:
        """Every directory whose record carries the managed tag, ended ones included."""
        found = []
        dirs = [self.instances_dir, *filter(None, [self.legacy_dir])]
        for path in sorted(p for d in dirs for p in d.iterdir()):
            if path.name.startswith("."):  # staging directories of launches in progress
                continue
            try:
                meta = InstanceDir(path).observe()
                nodes = gang_dirs(path.parent, meta)
                if nodes is not None:  # a gang is node 0's instance; its other nodes share its fate
                    meta = observe_gang(nodes, utcnow())
                    if nodes[0].path != path:
                        continue
            except (NotFoundError, ValueError):  # no record (yet), or not one of ours
                continue
            if meta.tags.get(TAG_MANAGED) == "true":
                found.append(meta.to_instance())
        return found

    def terminate(self, instance_id: str) -> None:
        """Hard-kill the instance's processes (SIGKILL) and mark it TERMINATED. Quiet if gone."""
        try:
            inst = self._instance(instance_id)
        except NotFoundError:
            return
        if not inst.meta_file.exists():
            return
        try:
            nodes = gang_dirs(inst.path.parent, inst.read())
            if nodes is not None:
                end_gang(nodes, utcnow())
                return
            inst.end(InstanceState.TERMINATED, REASON_TERMINATED)
        except NotFoundError:
            return  # removed while we were at it

    def runner(self, instance: Instance) -> Runner:
        inst = self._instance(instance.id)
        meta = inst.read() if inst.meta_file.exists() else None
        nodes = gang_dirs(inst.path.parent, meta) if meta is not None else None
        if meta is None or nodes is None:
            return self._runner(inst.path, meta)
        return GangRunner([self._runner(d.path, meta) for d in nodes],
                          nproc_per_node=max(1, meta.offer.gpu_count), port=master_port(meta.client_token))

    def _runner(self, path: Path, meta: Meta | None) -> LocalRunner:
        if meta is not None and meta.run_as is not None:  # a gang's nodes share node 0's user
            return IsolatedRunner(path, meta.run_as, container=self.container)
        return LocalRunner(path, container=self.container)

    # -- capabilities and knobs --------------------------------------------------------------
    def inject_preemption(self, instance_id: str, notice_s: float) -> None:
        """Announce that the instance is reclaimed in ``notice_s`` seconds (any market).

        Records ``preemption_deadline``, writes ``notice.json`` for the agent, and starts a
        detached reaper that kills the instance at the deadline. A second notice may move the
        deadline earlier, never later. No-op for an instance that already ended; NotFoundError
        for an unknown one.
        """
        inst = self._instance(instance_id)
        now = utcnow()
        meta = inst.announce(now + timedelta(seconds=notice_s), now)
        if not meta.state.alive or meta.preemption_deadline is None:
            return
        nodes = gang_dirs(inst.path.parent, meta) or [inst]
        if len(nodes) > 1:  # a notice on one node is a notice to the whole gang
            observe_gang(nodes, now)
        for node in nodes:
            spawn_detached([sys.executable, "-m", "gpuorch_local.reaper", str(node.path)],
                           cwd=node.path, log=node.path / "reaper.log", packages=("gpuorch_local",))

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: the local provider needs no credentials, only its state directory."""
        from gpuorch.provider.selfcheck import state_dir_finding  # the doctor's, not the daemon's

        check = f"provider {self.name}"
        if (unwritable := state_dir_finding(check, self.instances_dir, self.home)) is not None:
            return [unwritable]
        alive = sum(1 for i in self.list_managed() if i.state.alive)
        return [Finding.ok(check, f"no credentials needed; {alive} instance(s) alive under {self.instances_dir}"),
                self.isolation.finding("local isolation")]

    def set_capacity(self, zone: str, instance_type: str, spot: bool, available: bool) -> None:
        """Add or remove this market's exact entry in the capacity knob (wildcard entries stay).

        Same signature as ``FakeProvider.set_capacity``.
        """
        capacity.set_available(self.home, zone, instance_type, spot, available)


class _Nodes:
    """The local provider's single-instance launch and terminate, for ``launch_gang``."""

    def __init__(self, provider: LocalProvider) -> None:
        self.provider = provider

    def launch(self, request: LaunchRequest) -> Instance:
        return self.provider._launch_one(request)

    def terminate(self, instance_id: str) -> None:
        self.provider._instance(instance_id).end(InstanceState.TERMINATED, REASON_TERMINATED)

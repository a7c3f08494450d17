"""The provider port: the small interface every cloud adapter implements.

Core methods are on ``Provider``; what an adapter can do is its declared ``capabilities``
(``gpuorch.provider.capabilities``), and whole optional features are Protocols
(``SupportsVolumes``), which the core discovers with ``isinstance``; never by provider name. Adapters translate
their SDK's errors into ``gpuorch.errors`` at this boundary, and import their SDK lazily.

Every resource an adapter creates carries the tags from ``managed_tags`` so it can be found
again after a crash (look before creating) and swept when no live attempt owns it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import Field

from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.offer import Model, Offer

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from gpuorch.agent.container import RegistryLogin
    from gpuorch.agent.protocol import AgentStatus
    from gpuorch.doctor.findings import Finding
    from gpuorch.runners.port import Runner

from gpuorch.provider.tags import CLIENT_TOKEN_MAX as CLIENT_TOKEN_MAX  # re-exported: the port's names
from gpuorch.provider.tags import TAG_ATTEMPT as TAG_ATTEMPT
from gpuorch.provider.tags import TAG_JOB as TAG_JOB
from gpuorch.provider.tags import TAG_MANAGED as TAG_MANAGED
from gpuorch.provider.tags import TAG_NODE as TAG_NODE
from gpuorch.provider.tags import TAG_OWNER as TAG_OWNER
from gpuorch.provider.tags import client_token as client_token
from gpuorch.provider.tags import managed_tags as managed_tags


class VolumeSpec(Model):
    volume_id: str
    mount_path: str


class LaunchRequest(Model):
    job_id: int
    attempt: int
    offer: Offer
    spot: bool
    disk_gib: float = 50
    ssh_public_key: str | None = None
    volumes: tuple[VolumeSpec, ...] = ()
    max_lifetime_s: float | None = None  # cloud-side backstop where the provider has one
    # The job's container image (spec ``image:``), or None. Providers whose instance is itself a
    # container (RunPod, Vast) start the instance from it; the others ignore it here (their
    # agent runs it with the host's runtime, from the agent config).
    image: str | None = None
    owner: str = ""  # installation id; two gpuorch installations sharing an account never touch each other's
    # A multi-node gang (spec ``nodes:``): this instance is node ``node`` of ``nodes``, placed in
    # the attempt's ``placement_group`` (the cloud's cluster placement, created by the provider).
    node: int = 0
    nodes: int = 1
    placement_group: str | None = None

    @property
    def client_token(self) -> str:
        """Unique per (owner, job, attempt, node): see ``client_token``; node 0's is the attempt's."""
        token = client_token(self.job_id, self.attempt, self.owner)
        return f"{token}-n{self.node}" if self.node else token

    @property
    def tags(self) -> dict[str, str]:
        tags = managed_tags(self.job_id, self.attempt, self.owner)
        if self.nodes > 1:
            tags[TAG_NODE] = f"{self.node}-of-{self.nodes}"
        return tags


class InstanceState(StrEnum):
    PENDING = "pending"  # requested, booting
    RUNNING = "running"
    STOPPING = "stopping"  # shutting down at our request
    PREEMPTED = "preempted"  # reclaimed by the cloud (spot interruption)
    TERMINATED = "terminated"  # gone (at our request or its own shutdown)

    @property
    def alive(self) -> bool:
        return self in (InstanceState.PENDING, InstanceState.RUNNING)


class ScheduledStop(Model):
    """A stop the cloud has scheduled for an instance ahead of time (host retirement,
    maintenance), as opposed to a spot reclaim's short notice."""

    at: datetime  # the earliest time the cloud will stop it (EC2: the event's NotBefore)
    kind: str  # the cloud's event code, e.g. "instance-retirement", "instance-stop"
    description: str = ""
    # From when the provider reports it as the instance's ``preemption_deadline`` (the daemon then
    # moves the job off it): ``at`` less the provider's drain horizon.
    notice_at: datetime | None = None


class Instance(Model):
    """One instance as the provider reports it now.

    Billed times (the cloud's own record; ``gpuorch.money.record`` bills from them): ``created_at``
    is the provider's launch time, and ``ended_at``, set only once the instance is no longer
    alive, its stop or termination time - a reclaim's deadline, not the look that found it gone.
    Either is None where the provider keeps no such record (the daemon's observation then
    stands). The contract suite checks both against the calls that caused them.
    """

    id: str
    provider: str
    region: str
    zone: str
    instance_type: str
    spot: bool
    state: InstanceState
    tags: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    host: str | None = None  # address the runner connects to
    port: int | None = None
    state_reason: str | None = None
    # Set once the cloud has announced the instance will be reclaimed, to the announced kill time.
    # A stop scheduled far ahead is reported here only from ``scheduled_stop.notice_at`` on.
    preemption_deadline: datetime | None = None
    scheduled_stop: ScheduledStop | None = None  # known ahead of its deadline, for a warning
    ended_at: datetime | None = None  # when it stopped (terminated, reclaimed), if the provider says
    queued: str | None = None  # waits in the provider's queue (Kueue), not booting: why. created_at: its admission
    # The provider says this instance can never run the job (its host cannot pull the job's image):
    # why, in the market's words, never a credential. The daemon ends the attempt as failed at once
    # (not lost, so no relaunch loop) and terminates the instance if it is still alive.
    failure: str | None = None

    @property
    def job_id(self) -> int | None:
        v = self.tags.get(TAG_JOB)
        return int(v) if v and v.isdigit() else None

    @property
    def attempt(self) -> int | None:
        v = self.tags.get(TAG_ATTEMPT)
        return int(v) if v and v.isdigit() else None

    @property
    def owner(self) -> str:
        return self.tags.get(TAG_OWNER, "")


class Volume(Model):
    id: str
    provider: str
    region: str
    zone: str
    size_gib: float
    attached_to: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    # The provider's own storage price of this volume, USD per GiB-month (a Vast host's storage_cost),
    # what the ledger bills it at; None: its catalog's rate (gpuorch.money.storage).
    usd_per_gib_month: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class Provider(ABC):
    """Contract every adapter honours (tested by ``gpuorch.testing.contract``)."""

    name: str
    # What this adapter can do, declared once (``gpuorch.provider.capabilities``): each adapter
    # sets its own value on its class; the core reads ``provider.capabilities.X``, never an
    # attribute of the adapter. A wrapper forwards this one value.
    capabilities: Capabilities = Capabilities()

    @abstractmethod
    def offers(self) -> list[Offer]:
        """All offers this provider can sell now. May be served from a cache or catalog.

        Raises TransientError or AuthError; never returns offers of other providers.
        """

    @abstractmethod
    def launch(self, request: LaunchRequest) -> Instance:
        """Start one instance for ``request``, tagged with ``request.tags``.

        Idempotent by ``request.client_token``: calling it again for the same token returns the
        instance already created (in whatever state) and never creates a second one. The token
        includes ``request.owner``: a request of another owner (installation) for the same job
        and attempt numbers gets its own instance, tagged with its own ``gpuorch:owner``.
        May return a PENDING instance whose address is not known yet.
        Raises NoCapacityError, QuotaError, TransientError, PermanentError.

        Return quickly, or raise a "not yet" error (TransientError) to be called again with the
        same token on a later pass: do not wait minutes for a cloud operation. The daemon runs
        launches on a bounded pool and leaves a job whose launch is still out alone meanwhile,
        but a worker held by a hung call is one fewer for every other job's launch.
        """

    @abstractmethod
    def get(self, instance_id: str) -> Instance:
        """Current state of one instance. Raises NotFoundError once the cloud forgot it.

        An ``Instance`` is a frozen value: a change is a new object (it cannot be changed in
        place; never mutate its ``tags`` either). The daemon keeps what it observed and takes the
        very object again for "unchanged" (DESIGN.md 4, change is a value): hand out the same
        object while nothing changed, or a new one each time (only costlier).
        A terminated instance may still be returned (state TERMINATED/PREEMPTED) for a while.
        ``preemption_deadline`` is set once a reclaim is near (a spot notice: at once; a stop
        scheduled days ahead: only within the provider's drain horizon, ``scheduled_stop``
        telling of it before).
        """

    @abstractmethod
    def list_managed(self) -> list[Instance]:
        """Every instance carrying the ``gpuorch:managed`` tag, terminated ones included while the
        cloud still reports them. The daemon reconciles from this list (orphan sweep).

        Frozen values, as ``get``'s: an instance listed again unchanged may be the very object of
        the last listing (the sim's are: the steady pass then keeps its job without deciding it
        again), and any change is a new object, which the daemon always sees."""

    @abstractmethod
    def terminate(self, instance_id: str) -> None:
        """Ask for termination. Succeeds quietly if the instance is already gone or going.

        Returns without waiting; call ``get`` to observe the result.
        """

    def runner(self, instance: Instance) -> Runner:
        """The Runner that drives the agent on ``instance`` (local processes, SSH, ...).

        May be a new Runner each call or one kept per instance. Either way the daemon tells a
        change in the agent's status by its value (``runners.port.status_value``), never by
        whether ``Runner.status`` returned the same object: a kept runner may refresh one status
        object in place inside ``status`` and every change is still seen."""
        raise NotImplementedError(f"{self.name} provides no runner")

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> Provider:
        """Build from the daemon config's ``providers.<name>`` options, state under ``home``.

        The default suits an adapter without options: it is built with no arguments, and any
        option given is a UserInputError naming it. Adapters with options override this,
        validating them and raising UserInputError naming the option and the fix.
        """
        if options:
            from gpuorch.errors import UserInputError

            name = getattr(cls, "name", cls.__name__)
            raise UserInputError(f"providers.{name}.{sorted(options)[0]}: unknown option; {name} takes none")
        return cls()

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """What ``providers.<name>`` with ``options`` would sell, without the SDK or a cloud call
        (``submit``'s fit check). Default: the provider's rows of the shipped catalog."""
        from gpuorch.provider.catalog import load_offers

        name = getattr(cls, "name", None)
        return [o for o in load_offers() if o.provider == name]

    def check_offer(self, offer: Offer) -> None:
        """``launch``'s first check: PermanentError (code InvalidOffer) for another provider's offer."""
        if offer.provider != self.name:
            from gpuorch.errors import PermanentError

            raise PermanentError(f"offer of provider {offer.provider!r} sent to {self.name}", code="InvalidOffer")

    def agent_statuses(self, instances: Sequence[Instance]) -> Mapping[str, tuple[Runner, AgentStatus | None] | None]:
        """Capability ``agent_statuses``: many agents read in one call, by a provider whose runners
        answer inline (the sim). By instance id: (runner, status), or None for one whose runner
        cannot answer; an id left out is read on its own. Raises what ``Runner.status`` raises. The
        very answer object of the previous call for an instance promises its log and metrics did not
        change (the caller may skip them while ``status_value`` is unchanged too); the status itself
        is compared by value, so one refreshed in place is seen as changed."""
        raise NotImplementedError(f"{self.name} reads no agent statuses in one call")

    def can_attach_volume(self, instance_type: str, disk_type: str | None = None) -> bool:
        """Capability ``volume_attach_check``: whether ``instance_type`` can attach a volume of
        ``disk_type`` (None: the provider's default). Without the capability: every type can."""
        return True

    @classmethod
    def volume_types(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """Capability ``disk_types``: the disk types a job's ``volume.type`` may name on this
        provider with ``options`` (its ``providers.<name>`` config), the default first. Asked of
        the class, before any provider is built (``submit``); no cloud call. Default: none said."""
        return ()

    @classmethod
    def volume_size_range(cls, options: dict[str, Any], disk_type: str | None = None) -> tuple[float, float] | None:
        """Capability ``disk_types``: (min, max) GiB of a volume of ``disk_type`` (None: the
        default type), asked of the class. Default: None, no limits said."""
        return None

    @classmethod
    def volume_attachable(cls, options: dict[str, Any], instance_type: str, disk_type: str | None = None) -> bool:
        """Capability ``disk_types``: whether ``instance_type`` can attach ``disk_type`` (None: the
        default type), asked of the class (``can_attach_volume`` asks a built provider). Default:
        every type can."""
        return True

    def registry_login(self, registry: str) -> RegistryLogin | None:
        """Capability ``registry_login``: how an instance of this provider logs its container
        runtime in to ``registry`` (an image reference's host) with the instance's own identity,
        or None for a registry that is not this provider's. Pure: no cloud call; the agent runs
        the command it is given, and no key is ever copied to the instance."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and threads."""


@runtime_checkable
class SupportsVolumes(Protocol):
    """Persistent volumes that follow a job within a zone (tested by ``gpuorch.testing.volume_contract``)."""

    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str],
                      disk_type: str | None = None) -> Volume:
        """A detached volume in ``zone`` of at least ``size_gib``, carrying ``tags`` and listed by
        ``list_volumes`` from then on. Idempotent by the tags' job and owner in that zone: a
        repeat (after a crash) returns the volume the first call created. ``disk_type``: the
        cloud's disk type (None: the provider's default); PermanentError ``InvalidVolume.DiskType``
        for one it does not make."""
        ...

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        """Attach to ``instance_id``; quiet if already attached there. PermanentError with code
        ``InvalidVolume.ZoneMismatch`` across zones; TransientError ``VolumeInUse`` (a not-yet:
        nothing changes) while another instance holds it; NotFoundError for an unknown volume."""
        ...

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        """Detach from ``instance_id``; quiet if not attached there or the volume is gone."""
        ...

    def delete_volume(self, volume_id: str) -> None:
        """Delete; quiet if already gone. TransientError ``VolumeInUse`` (a not-yet) while attached."""
        ...

    def list_volumes(self) -> list[Volume]:
        """The volumes this provider created, with their ``attached_to``."""
        ...


@runtime_checkable
class SupportsPriceRefresh(Protocol):
    """Offers read live from the cloud's price and SKU APIs (``gpuorch catalog refresh``, and the
    daemon's scheduled refresh), where ``offers()`` itself reads a catalog."""

    def refresh_offers(self) -> list[Offer]:
        """Every offer in the configured zones/regions with today's list prices. Slow (paged
        listings of a whole price catalog): never called inside a reconcile pass. Raises
        ``AuthError`` (missing permission, API not enabled: the message names which),
        ``TransientError``, ``PermanentError`` (an answer that does not parse)."""
        ...


@runtime_checkable
class SupportsPreemptionInjection(Protocol):
    """Test and demo hook: reclaim an instance the way the cloud would, after a notice."""

    def inject_preemption(self, instance_id: str, notice_s: float) -> None: ...


@runtime_checkable
class SupportsDoctor(Protocol):
    """Self-check for ``gpuorch doctor``: credentials through the SDK's standard chain (e.g.
    ``boto3.Session().get_credentials()``), the identity they resolve to, the options.

    Returns findings (``gpuorch.doctor.findings.Finding``), each failure with a one-line fix;
    never puts secrets (keys, tokens, passwords, even in part) in a message. May call the
    cloud (read-only), and should answer within seconds.
    """

    def doctor(self) -> list[Finding]: ...

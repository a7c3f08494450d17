"""What a provider can do, declared once as one value (issue 32); a runner's is
``gpuorch.runners.port.RunnerCapabilities``.

Each adapter declares ``capabilities = Capabilities(max_nodes=8, runs_containers=True, ...)`` on
its class; the core reads ``provider.capabilities.X`` (a class works too: ``submit`` asks the
classes of providers it never builds) and calls the port's methods, never ``getattr`` on an
adapter. An optional method of the port (``Provider.agent_statuses``,
``Provider.can_attach_volume``, ``Provider.registry_login``, ``Runner.listed_heartbeat``) has a
default on the port and a flag here (``disk_types``: the class methods ``volume_types``,
``volume_size_range`` and ``volume_attachable``); the flag says the adapter's own version is there, and the
core calls the method only where the flag is set. ``gpuorch.testing.wrappers.flag_mismatches``
checks, for every shipped adapter, that each flag is set exactly when the method is overridden.

A wrapper around a port (``gpuorch.metrics.instrument.InstrumentedProvider``) forwards
``capabilities`` as the one value it is, and each flagged method.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Capabilities:
    """A provider's declared capabilities. The defaults suit a cloud sold by the hour whose
    instances are reached over the network; every field is a plain value (compared by ``==``)."""

    # The most instances one job may span (spec ``nodes:``); 1: no multi-node placement.
    max_nodes: int = 1
    # Its runners' agents can run a job's ``image:`` (docs/workloads.md); ``submit`` refuses an
    # image for a job no such enabled provider may take.
    runs_containers: bool = False
    # Capacity the user already owns (a Kubernetes cluster, SSH boxes): its offers may be priced 0
    # (or at an internal rate) and are never bought. Clouds sell at a positive price.
    owned_capacity: bool = False
    # The runner can still read an ended instance's agent status and logs (local processes leave
    # their files behind); a cloud VM's are gone with it.
    runner_outlives_instance: bool = False
    # A runner call may wait on the network (SSH to a VM): the daemon then reads agent statuses off
    # the pass. Runners that read local files or memory answer inline.
    runners_may_block: bool = True
    # A launch may wait on the network (a cloud API): the daemon spreads a pass's launches over its
    # launch pool's threads. Launches that write local files are made in the pass.
    launches_may_block: bool = True
    # Where ``refresh_offers`` reads its prices (``gpuorch catalog refresh`` writes it into the
    # catalog); "": the provider's ``offers()``.
    price_source: str = ""
    # ``Provider.agent_statuses``: many agents' statuses in one call (runners that do not block only).
    agent_statuses: bool = False
    # ``Provider.can_attach_volume``: which instance types can attach which disk types.
    volume_attach_check: bool = False
    # ``Provider.volume_types``, ``volume_size_range`` and ``volume_attachable``: what the class says
    # of its disk types before any provider is built (``submit``'s checks of a job's ``volume:``).
    disk_types: bool = False
    # ``Provider.registry_login``: how an instance logs its container runtime in to the provider's
    # own registry with the instance's identity (no key is copied to it).
    registry_login: bool = False
    # Volumes named in the launch request and mounted by the provider (``SupportsLaunchVolumes``,
    # gpuorch.provider.launch_volumes: Lambda filesystems, RunPod network volumes, Vast volumes):
    # a job's volume is created before its first launch and never attached to a running instance.
    volumes_at_launch: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_nodes, int) or isinstance(self.max_nodes, bool) or not 1 <= self.max_nodes <= 1024:
            raise ValueError(f"Capabilities.max_nodes: {self.max_nodes!r} is not a whole number from 1 to 1024")


# The optional port methods each flag stands for: (flag, method name).
PROVIDER_METHODS: tuple[tuple[str, str], ...] = (
    ("agent_statuses", "agent_statuses"), ("volume_attach_check", "can_attach_volume"),
    ("registry_login", "registry_login"))
# Those asked of the provider's class, never of a built (or wrapped) provider.
PROVIDER_CLASS_METHODS: tuple[tuple[str, str], ...] = (
    ("disk_types", "volume_types"), ("disk_types", "volume_size_range"))


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of ``Capabilities`` (or of the runner port's ``RunnerCapabilities``), in declaration order."""
    return tuple(f.name for f in fields(cls))

"""What ``decide`` sees: the observe stage's snapshot of one job, and the daemon's settings. Pure data.

A ``JobView`` is built by ``observe.Observer`` from the store's rows, the providers' listing and
the runners' answers, with no write to the store or to files; ``decide`` reads nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuorch.agent.protocol import AgentStatus
from gpuorch.clock import time_scales
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import Gate
from gpuorch.money.storage import rate_table
from gpuorch.placement.cost import StorageRates
from gpuorch.placement.owned import owned_providers
from gpuorch.policy.recovery import DEFAULT_STRATEGY
from gpuorch.provider.port import Instance, Provider
from gpuorch.store.models import Attempt, Job


@dataclass(frozen=True)
class Settings:
    poll_s: float = 2.0  # how often a running attempt is looked at
    boot_timeout_s: float = 900.0  # an instance whose agent cannot be reached this long is lost
    no_offer_retry_s: float = 30.0
    default_notice_s: float = 30.0
    launch_fanout: int = 5  # candidates tried in one pass when offers have no capacity
    avoid_preempted_zone_s: float = 3600.0  # after a preemption, prefer other zones this long
    max_launch_retries: int = 5  # transient failures of one attempt's launch before it moves on
    recovery_strategy: str = DEFAULT_STRATEGY  # for jobs whose spec names none (gpuorch.policy.recovery)
    heartbeat_timeout_s: float | None = None  # the agents' dead-man switch (None: off)
    max_lifetime_s: float | None = None  # LaunchRequest.max_lifetime_s: the cloud-side backstop
    volume_wait_s: float = 60.0  # a job volume's device must show up this long after its attach
    # A pass launches at most launch_batch queued jobs (None: pass_state.LAUNCH_BATCH) and decides
    # at most twice that many, at least one launched: a long queue drains over several passes, so
    # each pass still observes every running job (notices) within a bounded time, and in as many
    # passes on a loaded host as on a quiet one. launch_budget_s (None: no bound by time) also
    # stops it once its decisions and launches took that long, or the pass twice that.
    launch_batch: int | None = None
    launch_budget_s: float | None = None
    # (provider, market seconds per wall second) of simulated markets (gpuorch.clock.time_scales):
    # their policy timers (back-offs, zone avoidance) are market durations.
    time_scales: tuple[tuple[str, float], ...] = ()
    # (provider, Capabilities.max_nodes) of the daemon's providers: a gang (``nodes: N``) is placed
    # only where it can be launched. Empty: no limit (placement's own default, for tests).
    max_nodes: tuple[tuple[str, int], ...] = ()
    # The daemon's providers that sell owned capacity (``owned_capacity``): placement fills them
    # first and bursts to the others (``decide.owned``). Empty: no owned-first step.
    owned: tuple[str, ...] = ()
    # The storage rates of the daemon's providers' catalogs: placement counts a job volume's storage.
    storage_rates: StorageRates = ()


def for_providers(settings: Settings, providers: Mapping[str, Provider]) -> Settings:
    """``settings`` with what the daemon's providers say of themselves: their market clocks,
    the most nodes each places per job, which sell owned capacity, and their storage rates."""
    return dataclasses.replace(settings, time_scales=time_scales(providers),
                               owned=tuple(sorted(owned_providers(providers))),
                               max_nodes=tuple((n, p.capabilities.max_nodes) for n, p in sorted(providers.items())),
                               storage_rates=rate_table(providers))


@dataclass(frozen=True)
class AttemptView:
    row: Attempt
    observed: bool  # False: the provider could not be listed this pass; conclude nothing
    instance: Instance | None = None  # None: the provider does not report it
    agent: AgentStatus | None = None
    reachable: bool = False  # the runner answered (even if the agent has not started yet)


@dataclass(frozen=True)
class JobView:
    job: Job
    spec: JobSpec
    attempts: Sequence[AttemptView]  # ordered by number
    gate: Gate | None = None  # caps and sweep limits (gpuorch.money.caps); None: none apply

"""One job's snapshot: its attempts as decide sees them (``AttemptView``), with no write to the
store or to files. A runner that is missing, not implemented or unreachable is only "not
reachable", so decide still runs (the boot timeout fires)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.observe.listing import Key
from gpuorch.reconciler.observe.status_reads import Read, ReadKey, StatusReads, read_status
from gpuorch.reconciler.observe.views import AttemptView
from gpuorch.runners.port import Runner
from gpuorch.store.models import Attempt, AttemptStatus


def attempt_views(job_id: int, rows: Sequence[Attempt], observed: Mapping[Key, Instance], ok: set[str],
                  ask: Callable[[str, Instance | None], Provider | None], reads: StatusReads,
                  batched: Mapping[ReadKey, Read]) -> tuple[list[AttemptView], list[tuple[Attempt, Runner]]]:
    """The views of a job's attempt ``rows``, and the runners that answered (for its log and
    metrics). ``ask``: the provider worth asking for an attempt's agent, if any; its status is read
    off the pass (``reads``) if its runner may block, else from the pass's ``batched`` reads, else here."""
    views, runners = [], []
    for row in rows:
        if row.status == AttemptStatus.ENDED:
            views.append(AttemptView(row, observed=True))
            continue
        inst = observed.get((row.provider, job_id, row.number))
        agent, reachable = None, False
        # A requested attempt has no agent yet (start_reads): nothing to read, its instance is adopted.
        if row.status != AttemptStatus.REQUESTED and (provider := ask(row.provider, inst)) is not None:
            assert inst is not None
            key = (row.provider, row.job_id, row.number, inst.id)
            read = reads.take(key) if provider.capabilities.runners_may_block else batched.get(key)
            read = read or read_status(provider.runner, inst, reads.alarm, row.provider)
            agent, reachable = read.agent, read.reachable
            if agent is not None and read.runner is not None:
                runners.append((row, read.runner))
        views.append(AttemptView(row, observed=row.provider in ok, instance=inst, agent=agent, reachable=reachable))
    return views, runners

"""Orphan protection, cloud side: terminate live instances of this installation that no
unfinished attempt owns (the other direction, attempts whose instance vanished, is ``decide``'s:
they end as LOST).

Why it never takes an instance that is wanted: the instances were listed before the attempts
are read, and an attempt row is always committed before its launch call, so an instance
launched this pass, by this daemon or by another, already has its row when the attempts are
read. Instances of jobs another daemon holds are left to that daemon, so two daemons never both
act on one.

Cheap in steady state: the pass passes the attempts it loaded (after listing) that were live;
only an instance none of those owns is a suspect, and only then is the store asked again (a new
statement, which sees every row committed before it began).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from sqlmodel import Session, col, select

from gpuorch.errors import ProviderError
from gpuorch.jobs import events
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.runners import keys
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, WarmInstance

log = logging.getLogger("gpuorch.reconciler")

Key = tuple[str, int, int]  # (provider, job id, attempt number)


def sweep_orphans(store: Store, providers: Mapping[str, Provider], leases: Leases, observed: dict[Key, Instance],
                  ok: set[str], now: datetime, live: set[Key]) -> None:
    """``observed``: this pass's listing; ``ok``: providers listed fine; ``live``: keys of
    attempts loaded after the listing and unfinished then. Run before the pass's own launches and
    terminations (each a crash point), so a daemon that dies mid-pass still sweeps."""
    suspects = {key: inst for key in observed.keys() - live  # a set difference in C first
                if key[0] in ok and (inst := observed[key]).state.alive}
    if not suspects:
        return
    with store.read() as s:
        owned = {tuple(r) for r in s.exec(select(Attempt.provider, Attempt.job_id, Attempt.number)
                                          .where(Attempt.status != AttemptStatus.ENDED))}
        pooled = warm_owned(s)  # a warm instance (spec keep_warm): idle in the pool, or its lessee's
    theirs = leases.others(now)
    for key, inst in suspects.items():
        if key in owned or key[1] in theirs or (key[0], inst.id) in pooled:
            continue
        try:
            providers[key[0]].terminate(inst.id)
        except ProviderError as e:
            log.warning("orphan %s: terminate failed: %s", inst.id, e)
            continue
        crashpoint("orphan.terminated")
        with store.write() as ws:
            events.record(ws, now, "orphan_terminated", f"{key[0]} instance {inst.id} had no live attempt",
                          job_id=key[1], attempt=key[2])


def warm_owned(s: Session) -> set[tuple[str, str]]:
    """(provider, instance id) of the instances the warm pool owns: an open idle period's, and
    one a live attempt runs on (a leased warm instance carries its first attempt's tags). The
    period is opened in the transaction after its attempt's End, and a lease's attempt row in the
    one that closes it, so a read after the listing sees every instance handed over before it."""
    idle = s.exec(select(WarmInstance.provider, WarmInstance.instance_id).where(col(WarmInstance.ended_at).is_(None)))
    leased = s.exec(select(Attempt.provider, Attempt.instance_id).join(
        WarmInstance, col(WarmInstance.instance_id) == col(Attempt.instance_id)).where(
        Attempt.status != AttemptStatus.ENDED, col(WarmInstance.status) == "leased"))
    return {(p, i) for p, i in idle} | {(p, i) for p, i in leased if i}


def sweep_keys(home: Path, store: Store) -> None:
    """Delete the SSH keys (``runners.keys``) of jobs with no live attempt: finished jobs whose
    keys a crash kept, and jobs between attempts (the next launch makes new ones).

    Safe for the same reason as the instance sweep: the key directories are listed before the
    attempts are read, and an attempt row is committed before its launch makes the keys.
    """
    ids = keys.key_job_ids(home)
    if not ids:
        return
    with store.read() as s:
        live = set(s.exec(select(Attempt.job_id).where(Attempt.status != AttemptStatus.ENDED)
                          .where(col(Attempt.job_id).in_(ids))))
    for job_id in ids:
        if job_id not in live:
            keys.delete_job_keys(home, job_id)

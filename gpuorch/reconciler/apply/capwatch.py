"""``cap.warning``: a cap (a job's budget, a sweep's, the daily one) is 80 % spent.

The pass observes each gated job's spend against its caps (``money.caps.Gate``, from the ledger
the pass loads anyway); the first pass that sees a scope at or over ``WARN_SHARE`` of its cap
records an event ``cap_warning`` and its outbox row in one write transaction. The row's id is
derived from the scope and the cap's amount (``msg_cap80_...``, unique in the outbox), so a scope
is told once per crossing: once for a sweep's $50 cap, once more if the cap is raised to $80 and
its spend crosses $64, never twice by a restarted daemon or by two daemons at once (the second
insert fails on the unique id and its transaction, event included, is rolled back).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from hashlib import sha256
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from gpuorch.jobs import events
from gpuorch.money.caps import Cap, Gate, day_start
from gpuorch.notify.kinds import WARN_SHARE
from gpuorch.store import Store
from gpuorch.store.models import Job, Notification

log = logging.getLogger("gpuorch.reconciler")
MAX_KNOWN = 100_000  # keys remembered per daemon life (a re-check after forgetting is one read)


class CapWatch:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._told: set[str] = set()  # keys this daemon has written or found written

    @staticmethod
    def _key(job: Job, cap: Cap, now: datetime) -> tuple[str, str]:
        """(key, scope): what one crossing is, and the scope's name in the event."""
        if cap.daily:
            return f"daily:{day_start(now):%Y-%m-%d}:{cap.limit!r}", "daily"
        if job.sweep_id is not None and cap.scope.startswith("sweep"):  # "sweep NAME budget" (money.caps)
            return f"sweep:{job.sweep_id}:{cap.limit!r}", "sweep"
        return f"job:{job.id}:{cap.limit!r}", "job"

    def check(self, job: Job, gate: Gate) -> None:
        """Tell each of ``gate``'s caps that has crossed ``WARN_SHARE`` and was not told yet."""
        for cap in gate.caps:
            if cap.limit <= 0 or cap.spent < WARN_SHARE * cap.limit:
                continue
            key, scope = self._key(job, cap, gate.now)
            if key not in self._told:
                self._tell(job, cap, key, scope, gate.now)

    def _tell(self, job: Job, cap: Cap, key: str, scope: str, now: datetime) -> None:
        uid = "msg_cap80_" + sha256(f"{self.store.installation_id}:{key}".encode()).hexdigest()[:32]
        share = cap.spent / cap.limit
        where = {"job": f"job {job.name} ({job.id})", "daily": f"the daily cap ({day_start(now):%Y-%m-%d} UTC)"}.get(
            scope, cap.scope.removesuffix(" budget"))
        message = f"{where} has spent ${cap.spent:.2f} of its ${cap.limit:.2f} cap ({share:.0%})"
        data: dict[str, Any] = {"scope": scope, "cap_usd": cap.limit, "spent_usd": round(cap.spent, 6),
                                "share": round(share, 4), "sweep_id": job.sweep_id if scope == "sweep" else None}
        job_id = job.id if scope == "job" else None
        try:
            with self.store.write() as s:
                if s.exec(select(Notification.id).where(Notification.uid == uid)).first() is None:
                    events.record(s, now, "cap_warning", message, job_id=job_id, **data)
                    s.add(Notification(uid=uid, ts=now, type="cap.warning", job_id=job_id, message=message,
                                       data=json.dumps(data)))
        except IntegrityError:  # another daemon told it between our look and our insert
            log.debug("cap warning %s already told", key)
        if len(self._told) >= MAX_KNOWN:
            self._told.clear()
        self._told.add(key)

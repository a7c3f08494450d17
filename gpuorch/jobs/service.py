"""What the CLI and the HTTP API both do with jobs, on the store of this host.

``JobService`` is the one implementation of submit, status, cancel, events and logs, and of the
sweep commands (``sweep_submit``, ``sweeps``, ``sweep``, ``sweep_cancel``); the CLI calls it
directly (no ``--server``) and the API's endpoints are thin wrappers around it, so a command
gives the same answer and the same one-line errors either way. ``gpuorch.api.client.Client`` has
the same methods over HTTP. Every method returns plain JSON-able data (datetimes stay datetimes;
callers encode them with ``str``) and raises ``UserInputError`` for anything a user can fix.

Given a URL instead of a ``Store``, the service opens the store on first need, and ``jobs`` and
``job`` read a current SQLite store through ``gpuorch.store.lite`` (stdlib ``sqlite3``) without
importing the ORM: ``gpuorch status`` starts in a fraction of the time. The rows from either
source have the same attributes, and ``job_summary``/``attempt_dict`` below are the one
implementation of what a job's status says. PostgreSQL, and every write, go through ``Store``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuorch.clock import utcnow
from gpuorch.errors import UnknownJob, UserInputError
from gpuorch.jobs.counts import counts
from gpuorch.jobs.kinds import kind_of
from gpuorch.money.cost import attempt_cost

if TYPE_CHECKING:
    from gpuorch.jobs.logmirror import LogMirror
    from gpuorch.jobs.spec import JobSpec
    from gpuorch.store import Store
    from gpuorch.store.lite import LiteReader, Row
    from gpuorch.store.models import Attempt, Job
    from gpuorch.sweeps.spec import SweepSpec

LOG_CHUNK = 1 << 20  # bytes of job output per read_log call


def deadline_summary(job: Job | Row, attempts: Sequence[Attempt | Row], now: datetime) -> dict[str, Any] | None:
    """A job's deadline as ``status`` shows it: when, hours left, work saved, and the slack (hours
    the job may still lose and finish on on-demand) when its work is known from the spec."""
    try:
        spec = json.loads(job.spec)
    except (TypeError, ValueError):
        return None
    d = spec.get("deadline") if isinstance(spec, dict) else None
    if not d:
        return None
    from gpuorch.policy.live import DEFAULT_MARGIN_S, DEFAULT_STARTUP_S, Situation, progress, slack_s
    from gpuorch.when import parse_instant

    at = parse_instant(d["at"], job.created_at)
    spans = [(a.started_at, a.last_checkpoint_at, a.ended_at if not a.status.live else None) for a in attempts]
    done, _ = progress(spans, now, spec.get("checkpoint") is not None)
    model = spec.get("model") or {}
    work_s = d["job_hours"] * 3600 if d.get("job_hours") else model.get("duration")
    slack = None
    if work_s and not job.status.terminal:
        startup = d["startup"] if d.get("startup") is not None else DEFAULT_STARTUP_S
        sit = Situation(job.created_at, at, now, work_s, done, startup, None, margin_s=DEFAULT_MARGIN_S)
        slack = round(slack_s(sit) / 3600, 2)
    return {"at": at, "left_h": round((at - now).total_seconds() / 3600, 2), "done_h": round(done / 3600, 2),
            "work_h": round(work_s / 3600, 2) if work_s else None, "slack_h": slack}


def _where(a: Attempt | Row) -> str:
    return f"{a.provider}/{a.zone}/{a.instance_type}/{'spot' if a.spot else 'on-demand'}"


def job_summary(job: Job | Row, attempts: Sequence[Attempt | Row], now: datetime) -> dict[str, Any]:
    """What ``status`` says of a job; ``runs`` and ``tries``: ``jobs.counts`` (``attempts``: tries)."""
    cur = attempts[-1] if attempts else None
    return {
        "id": job.id,
        "name": job.name,
        "kind": kind_of(job.spec),  # job, or dev (a dev box: gpuorch.devbox)
        "status": job.status.value,
        "message": job.message,
        "attempts": len(attempts),
        **counts(attempts),
        "preemptions": job.preemptions,
        "failures": job.failures,
        "where": _where(cur) if cur else None,
        "last_checkpoint": next((a.last_checkpoint for a in reversed(attempts) if a.last_checkpoint), None),
        "cost": round(sum(attempt_cost(a, now) for a in attempts), 4),
        "lost_work_s": round(sum(a.lost_work_s or 0.0 for a in attempts), 1),
        "exit_code": job.exit_code,
        "result": json.loads(job.result) if job.result else None,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "daemon": job.lease_owner,  # host/pid/random of the daemon holding it (several daemons: docs/ha.md)
        "deadline": deadline_summary(job, attempts, now),  # None without one (docs/policy.md)
    }


def attempt_dict(a: Attempt | Row, now: datetime) -> dict[str, Any]:
    return {
        "number": a.number, "status": a.status.value, "reason": a.reason.value if a.reason else None,
        "provider": a.provider, "region": a.region, "zone": a.zone, "instance_type": a.instance_type,
        "gpu": a.gpu, "gpu_count": a.gpu_count, "spot": a.spot, "price_per_hour": a.price_per_hour,
        "instance_id": a.instance_id, "resumed_from": a.resumed_from, "last_checkpoint": a.last_checkpoint,
        "lost_work_s": a.lost_work_s, "exit_code": a.exit_code, "message": a.message,
        "requested_at": a.requested_at, "started_at": a.started_at, "notice_at": a.notice_at, "ended_at": a.ended_at,
        "cost": round(attempt_cost(a, now), 4),
    }


def job_detail(job: Job | Row, attempts: Sequence[Attempt | Row], now: datetime,
               decision: Any = None) -> dict[str, Any]:
    """``job_summary`` with ``attempt_list``; with a deadline, the policy's latest decision
    (``decision``: the newest ``deadline`` event)."""
    out = job_summary(job, attempts, now) | {"attempt_list": [attempt_dict(a, now) for a in attempts]}
    if out["deadline"] is not None and decision is not None:
        out["deadline"]["decision"] = {"ts": decision.ts, "message": decision.message,
                                       **(json.loads(decision.data) if decision.data else {})}
    return out


class JobService:
    def __init__(self, store: Store | None, home: Path, now: Callable[[], datetime] = utcnow, *,
                 url: str | None = None,
                 providers: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None) -> None:
        """On ``store``, or (``store=None``) on the store at ``url``, opened when first needed.

        ``providers`` is the configuration's (name -> options), or a function returning it (read
        when first needed): ``submit`` checks a spec against what they sell. Without it (a service
        that only reads) ``submit`` refuses to run.
        """
        if store is None and url is None:
            raise ValueError("JobService needs a store or a url")
        self._store, self._url, self.home, self.now = store, url, home, now
        self.providers = providers

    @property
    def store(self) -> Store:
        if self._store is None:
            from gpuorch.store import Store

            self._store = Store(self._url)  # type: ignore[arg-type]
        return self._store

    @cached_property
    def mirror(self) -> LogMirror:
        from gpuorch.jobs.logmirror import LogMirror

        return LogMirror(self.home)

    @contextmanager
    def _lite(self) -> Iterator[LiteReader | None]:
        """A sqlite3 reader while the store is not open and is a current SQLite one, else None."""
        conn = None
        if self._store is None and self._url is not None:
            from gpuorch.store.lite import open_lite

            conn = open_lite(self._url)
        if conn is None:
            yield None
            return
        from gpuorch.store.lite import LiteReader

        try:
            yield LiteReader(conn)
        finally:
            conn.close()

    def submit(self, spec: JobSpec, source: str = "job spec") -> dict[str, Any]:
        """Check a validated spec against the providers' offers, then queue it (its workdir, if
        any, already an absolute path on this host). ``source`` names the spec in error lines.

        Raises UserInputError, and stores nothing, for a job no GPU configuration can hold or a
        deadline on-demand cannot meet (``gpuorch.jobs.submitcheck``); ``warning`` is the line for a job
        accepted with a caveat (no enabled offer fits today; only on-demand meets the deadline).
        """
        from gpuorch.jobs import intent as jobs
        from gpuorch.jobs.submitcheck import fit_check, workload_check
        from gpuorch.registry import offline_offers, provider_class

        if self.providers is None:
            raise ValueError("JobService.submit needs the configuration's providers to check the spec")
        providers = self.providers() if callable(self.providers) else self.providers
        now = self.now()
        checked = spec
        if spec.volume is not None:  # placed only where volumes are; refused if nowhere
            from gpuorch.jobs.submitcheck import volume_scope
            from gpuorch.registry import available, volume_size_ranges, volume_types, with_volumes

            checked = volume_scope(spec, list(providers), with_volumes(available()), source,
                                   volume_size_ranges(dict(providers), spec.volume.type), volume_types(dict(providers)))
        if spec.image is not None or spec.nodes > 1:  # only then are the provider classes imported
            workload_check(checked, {name: provider_class(name) for name in providers}, source)
        offers = offline_offers(dict(providers), self.home)
        if spec.volume is not None:  # only instance types that can attach the volume's disk type
            from gpuorch.jobs.submitcheck import volume_offers
            from gpuorch.registry import volume_attach_checks

            offers = volume_offers(checked, offers, volume_attach_checks(dict(providers), spec.volume.type), source)
        warning = fit_check(checked, offers, source, now, configured=providers)
        job = jobs.submit(self.store, spec, now)
        from gpuorch.store import wake

        wake.notify(self.store)  # a sleeping daemon launches it now, not at its next poll
        return {"id": job.id, "name": job.name, "status": job.status.value, "warning": warning}

    def jobs(self) -> list[dict[str, Any]]:
        now = self.now()
        with self._lite() as lite:
            if lite is not None:
                by_job = lite.attempts()
                return [job_summary(j, by_job.get(j.id, []), now) for j in lite.jobs()]
        from sqlmodel import col, select

        from gpuorch.jobs import intent as jobs
        from gpuorch.store.models import Job

        with self.store.read() as s:
            return [job_summary(j, jobs.attempts_of(s, j.id), now)  # type: ignore[arg-type]
                    for j in s.exec(select(Job).order_by(col(Job.id)))]

    def job(self, ref: str) -> dict[str, Any]:
        """One job by id or name, with ``attempt_list``. Raises UnknownJob."""
        now = self.now()
        with self._lite() as lite:
            if lite is not None:
                row = lite.find_job(ref)
                if row is None:
                    raise UnknownJob.ref(ref)
                return job_detail(row, lite.attempts_of(row.id), now, lite.last_event(row.id, "deadline"))
        from sqlmodel import col, select

        from gpuorch.jobs import intent as jobs
        from gpuorch.store.models import Event

        with self.store.read() as s:
            j = jobs.find_job(s, ref)
            decision = s.exec(select(Event).where(Event.job_id == j.id, Event.kind == "deadline")
                              .order_by(col(Event.id).desc()).limit(1)).first()
            return job_detail(j, jobs.attempts_of(s, j.id), now, decision)  # type: ignore[arg-type]

    def daemon(self) -> dict[str, Any]:
        """Whether a daemon is running on this store (``gpuorch.store.heartbeat.daemon_state``)."""
        from gpuorch.store.heartbeat import daemon_state, read_state

        now = self.now()
        with self._lite() as lite:
            if lite is not None:
                return daemon_state(lite.heartbeats(), lite.leases(now), now)
        return read_state(self.store, now)

    def cancel(self, ref: str) -> dict[str, Any]:
        from gpuorch.jobs import intent as jobs

        j = jobs.cancel(self.store, ref, self.now())
        return {"id": j.id, "name": j.name, "status": j.status.value, "cancel_requested": j.cancel_requested,
                "done": j.status.terminal}

    def events(self, ref: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """The newest ``limit`` events (of one job, with ``ref``), oldest first."""
        from sqlmodel import col, select

        from gpuorch.jobs import intent as jobs
        from gpuorch.store.models import Event

        with self.store.read() as s:
            q = select(Event)
            if ref is not None:
                q = q.where(Event.job_id == jobs.find_job(s, ref).id)
            rows = list(s.exec(q.order_by(col(Event.id).desc()).limit(limit)))[::-1]
        return [{"ts": e.ts, "job_id": e.job_id, "attempt": e.attempt, "kind": e.kind, "message": e.message,
                 "data": json.loads(e.data) if e.data else None} for e in rows]

    def log_state(self, ref: str) -> dict[str, Any]:
        """What ``logs`` needs to poll a job: its id, attempt numbers, and whether it is over."""
        from gpuorch.jobs import intent as jobs

        with self.store.read() as s:
            j = jobs.find_job(s, ref)
            numbers = [a.number for a in jobs.attempts_of(s, j.id)]  # type: ignore[arg-type]
        return {"id": j.id, "name": j.name, "attempts": numbers, "done": j.status.terminal}

    def read_log(self, job_id: int, attempt: int, offset: int = 0, limit: int = LOG_CHUNK) -> bytes:
        """Up to ``limit`` bytes of the mirrored output of one attempt from ``offset`` (b"" if none yet)."""
        try:
            with self.mirror.path(job_id, attempt).open("rb") as f:
                f.seek(max(0, offset))
                return f.read(limit)
        except FileNotFoundError:
            return b""

    # -- sweeps ------------------------------------------------------------------------------------
    def sweep_submit(self, spec: SweepSpec, trials: list[tuple[dict[str, Any], JobSpec]],
                     source: str = "sweep file") -> dict[str, Any]:
        """Check a validated sweep (``gpuorch.sweeps.spec.load_sweep`` or ``parse_sweep``; the trials'
        workdir, if any, already an absolute path on this host), then store it and its trials.

        Raises UserInputError, and stores nothing, for a trial deadline on-demand cannot meet
        (``submitcheck.sweep_deadline_check``) or a name still active; ``warning`` is the line for
        a sweep accepted with a caveat (only on-demand meets the deadline).
        """
        from gpuorch.jobs.submitcheck import sweep_deadline_check, workload_check
        from gpuorch.registry import offline_offers, provider_class
        from gpuorch.sweeps import intent

        now = self.now()
        job = trials[0][1] if trials else None
        if job is not None and (job.image is not None or job.nodes > 1) and self.providers is not None:
            enabled = self.providers() if callable(self.providers) else self.providers  # trials share one template
            workload_check(job, {name: provider_class(name) for name in enabled}, source)
        offers: list[Any] = []
        if job is not None and (job.resources.gpu is not None or job.model is not None):
            if self.providers is None:
                raise ValueError("JobService.sweep_submit needs the configuration's providers to check the sweep")
            providers = self.providers() if callable(self.providers) else self.providers
            offers = offline_offers(dict(providers), self.home)
        warning = sweep_deadline_check(spec, trials, offers, source, now)
        if job is not None and offers and spec.budget is not None:
            from gpuorch.jobs.submitcheck import estimate_candidates
            from gpuorch.sweeps.capcheck import cap_warning

            cap = cap_warning(spec.budget.max_cost, spec.max_parallel, job, estimate_candidates(job, offers))
            warning = "; ".join(w for w in (warning, cap) if w) or None
        sweep = intent.submit(self.store, spec, trials, now)
        from gpuorch.store import wake

        wake.notify(self.store)  # its first trials launch now, not at the daemon's next poll
        return {"id": sweep.id, "name": sweep.name, "trials": len(trials), "status": sweep.status.value,
                "warning": warning}

    def sweeps(self) -> list[dict[str, Any]]:
        """Every sweep's report (``sweep``) without its ``trials``, oldest first."""
        from sqlmodel import col, select

        from gpuorch.store.models import Sweep
        from gpuorch.sweeps.report import sweep_report

        now = self.now()
        with self.store.read() as s:
            return [{k: v for k, v in sweep_report(s, w, now).items() if k != "trials"}
                    for w in s.exec(select(Sweep).order_by(col(Sweep.id)))]

    def sweep(self, ref: str) -> dict[str, Any]:
        """One sweep by id or name (the newest with it): its trials, best first, and its spend.
        Raises UnknownSweep."""
        from gpuorch.sweeps.intent import find_sweep
        from gpuorch.sweeps.report import sweep_report

        with self.store.read() as s:
            return sweep_report(s, find_sweep(s, ref), self.now())

    def sweep_update(self, ref: str, budget: float | None = None, deadline: str | None = None) -> dict[str, Any]:
        """New limits for a sweep (``sweeps.intent.update``); UserInputError, nothing changed, for a
        budget below its spend or a deadline in the past. Raises UnknownSweep."""
        from gpuorch.bounds import usd
        from gpuorch.sweeps import intent

        now = self.now()
        cap = None if budget is None else usd(budget, "--budget")  # NaN would be stored as NULL: no cap
        sweep = intent.update(self.store, ref, now, cap, _instant("--deadline", deadline, now))
        return {"id": sweep.id, "name": sweep.name, "status": sweep.status.value, "max_cost": sweep.max_cost,
                "deadline": sweep.deadline}

    def sweep_resume(self, ref: str, budget: float | None = None, deadline: str | None = None) -> dict[str, Any]:
        """Restart a done or cancelled sweep's unfinished trials from their checkpoints
        (``sweeps.intent.resume``), optionally with new limits. Raises UnknownSweep."""
        from gpuorch.bounds import usd
        from gpuorch.sweeps import intent

        now = self.now()
        cap = None if budget is None else usd(budget, "--budget")
        sweep, hit = intent.resume(self.store, ref, now, cap, _instant("--deadline", deadline, now))
        return {"id": sweep.id, "name": sweep.name, "status": sweep.status.value, "trials_resumed": hit,
                "max_cost": sweep.max_cost, "deadline": sweep.deadline}

    def sweep_cancel(self, ref: str) -> dict[str, Any]:
        """Cancel a sweep's unfinished trials. Raises UnknownSweep."""
        from gpuorch.sweeps import intent

        sweep, hit = intent.cancel(self.store, ref, self.now())
        return {"id": sweep.id, "name": sweep.name, "status": sweep.status.value, "trials_cancelled": hit}


def _instant(option: str, value: str | None, now: datetime) -> datetime | None:
    """``8h`` or ``2026-11-28T08:00`` as an absolute UTC time; UserInputError naming ``option``."""
    if value is None:
        return None
    from gpuorch.bounds import too_far
    from gpuorch.when import parse_instant

    try:
        when = parse_instant(value, now)
    except (ValueError, OverflowError) as e:
        raise UserInputError(f"{option}: {' '.join(str(e).split())[:200]}") from None
    if too_far(value, when, now):
        raise UserInputError(f"{option}: {value[:40]} is more than ten years away; give a nearer time")
    return when

"""The reconciler's money and sweep hooks: load the ledger and build each job's gate, admit a
launch atomically, carry out a clean stop, record spot price moves, collect metrics, finish
sweeps. The decisions themselves are pure (gpuorch.money.caps, reconciler.gates).

Every write on a job goes through the reconciler's ``txn`` (it checks this daemon's lease).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import and_, exists, func, or_, text
from sqlmodel import Session, col, select

from gpuorch.agent.limits import metric_lines
from gpuorch.clock import aware
from gpuorch.jobs import events
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import IN_FLIGHT, Gate, Ledger, Policy, SweepState, day_start, gate_for, runway_s
from gpuorch.money.cost import current_price, price_move, with_price_change
from gpuorch.money.finishing import over, runs_on, with_drain
from gpuorch.money.record import as_seen, corrections, reported_end
from gpuorch.money.storage import ledger_rows as stored  # job volumes' storage, as warm idle time's rows
from gpuorch.placement import Candidate
from gpuorch.provider.port import Instance, Offer, Provider
from gpuorch.reconciler.apply.uploads import upload_times
from gpuorch.reconciler.decide import actions as A
from gpuorch.reconciler.observe.views import AttemptView, JobView
from gpuorch.runners.port import Runner, RunnerUnavailable
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, Sweep, SweepStatus
from gpuorch.sweeps.finish import for_warm
from gpuorch.sweeps.metrics import merge_lines, steps_of
from gpuorch.sweeps.pruning import TrialHistory, extend_history, parse_history, verdict
from gpuorch.sweeps.waits import Avoid, trial_end, waits
from gpuorch.warm.ledger import ledger_rows

if TYPE_CHECKING:  # the sweep spec's models (0.8 MB) are loaded only once a sweep is active: _rules_of
    from gpuorch.sweeps.spec import Pruning

log = logging.getLogger("gpuorch.reconciler")

Txn = Callable[[int], AbstractContextManager[tuple[Session, Job]]]
TERMINAL = [s for s in JobStatus if s.terminal]
METRICS_READ = 256 * 1024  # bytes per attempt per pass
BUDGET_LOCK = 4243  # PostgreSQL advisory lock serialising launch admissions


class Money:
    def __init__(self, store: Store, policy: Policy, txn: Txn) -> None:
        self.store, self.policy, self.txn = store, policy, txn
        self._loaded: tuple[Ledger, dict[int, SweepState]] | None = None
        self._spot: tuple[Sequence[Offer], dict[tuple[str, str, str], float | None]] | None = None
        self.metrics_sink: Callable[[int, int, bytes], None] | None = None  # (job, attempt, whole lines read)
        self._rule_cache: dict[int, tuple[Pruning, str] | None] = {}  # sweep id -> (rule, mode); specs never change
        self._rules: dict[int, tuple[Pruning, str]] = {}  # of the active sweeps, as last loaded
        self._histories: dict[int, list[TrialHistory]] = {}  # sweep id -> its trials' histories, this pass
        self._verdicts: dict[tuple[int, int], str | None] = {}  # (job id, history length) -> verdict
        self._max_steps: dict[int, int] = {}  # sweep id -> objective.max_step, where named
        self._capped: set[int] = set()  # the active sweeps with a budget, as last loaded
        self._waits: dict[int, str] = {}  # job id -> why it waits for trials ahead (finish first), this ledger
        self._sweep_graces: dict[int, float] = {}  # sweep id -> the longest stop grace its uploads called for
        self._uploads: Mapping[tuple[int, int], float] = {}  # (job, attempt) -> its longest upload seen, as loaded
        self._avoid: Avoid = None  # the pass's back-offs in force
        self._no_sweep_done_at: int | None = None  # the store's data_version when finish_sweeps found none done
        # This pass's listing by (provider, job, attempt): the cloud's record of launch and end times.
        self._observed: Mapping[tuple[str, int, int], Instance] = {}
        self._live: AbstractSet[tuple[str, int, int]] = frozenset()  # the pass's live attempt keys (begin_pass)
        self._settled: set[tuple[tuple[str, int, int], datetime | None]] = set()  # ends checked (finished jobs)

    # -- the gate -------------------------------------------------------------------------
    def _applies(self, job: Job, spec: JobSpec) -> bool:
        return self.policy.daily_cap is not None or spec.budget is not None or job.sweep_id is not None

    def ungated(self, job: Job, spec: JobSpec) -> bool:
        """Whether no gate can ever apply to this job row (no daily cap, budget or sweep): its
        steady decision may be kept without a view (steady.py, ``Steady.quick``)."""
        return not self._applies(job, spec)

    def _load(self, s: Session, now: datetime) -> tuple[Ledger, dict[int, SweepState]]:
        active = list(s.exec(select(Sweep).where(Sweep.status == SweepStatus.ACTIVE)))
        self._rules_of(active)
        self._waits, ids = {}, [w.id for w in active]
        rows = s.exec(select(Attempt, Job.sweep_id).join(Job, col(Job.id) == col(Attempt.job_id)).where(or_(
            col(Attempt.status) != AttemptStatus.ENDED, col(Attempt.ended_at) >= day_start(now),
            col(Job.status).not_in(TERMINAL), col(Job.sweep_id).in_(ids))))
        # A live attempt the listing shows ended (daemon away) bills to the cloud's end time from this pass's look.
        seen, every = self._observed, [*rows, *ledger_rows(s, day_start(now), ids), *stored(s, day_start(now), ids)]
        uploads = self._uploads = upload_times(s)
        ledger = Ledger.build([(as_seen(a, seen.get((a.provider, a.job_id, a.number)), now), sid) for a, sid in every],
                              now, self.policy, uploads)
        for a, sweep in every:  # uploads are read of live attempts: a sweep's grace is remembered past their ends
            if sweep is not None and (up := uploads.get((a.job_id, a.number))) is not None:
                self._sweep_graces[sweep] = max(self.policy.for_attempt(up).stop_grace_s,
                                                self._sweep_graces.get(sweep, 0.0))
        if not ids:
            return ledger, {}
        flying, held = dict[int, int](), dict[int, int]()
        for sid, n in s.exec(select(Job.sweep_id, func.count()).where(
                col(Job.sweep_id).in_(ids), col(Job.status).in_(IN_FLIGHT)).group_by(col(Job.sweep_id))).all():
            flying[sid or 0] = n
        self._waits, resuming = waits(s, active, ledger, self._max_steps,
                                      {k: r[0].min_steps for k, r in self._rules.items()},
                                      self._spot[0] if self._spot is not None else (),  # the pass's catalog
                                      self.policy, self._sweep_graces, self._avoid)
        waiting = set(self._waits)
        for jid, sid in s.exec(select(Job.id, Job.sweep_id).where(col(Job.sweep_id).in_(ids),
                                                                 Job.status == JobStatus.HELD)).all():
            if jid not in waiting:  # a held trial finish-first keeps waiting does not block fresh ones
                held[sid or 0] = held.get(sid or 0, 0) + 1
        sweeps = {w.id: SweepState(w.id, w.name, w.max_cost, w.deadline, w.max_parallel, flying.get(w.id, 0),
                                   held.get(w.id, 0), frozenset(resuming.get(w.id or 0, ())))
                  for w in active if w.id is not None}
        return ledger, sweeps

    def begin_pass(self, observed: Mapping[tuple[str, int, int], Instance] | None = None,
                   live: AbstractSet[tuple[str, int, int]] = frozenset(), avoid: Avoid = None) -> None:
        """A new pass; ``observed``: its listing (instances by provider, job and attempt);
        ``live``: the keys of the held jobs' attempts not ended, which their views bill; ``avoid``:
        its back-offs in force (a trial's next start is priced past them)."""
        self._loaded, self._histories, self._avoid = None, {}, avoid
        self._observed, self._live = observed if observed is not None else {}, live

    def gate(self, view: JobView, now: datetime, *, lease: bool = False) -> Gate | None:
        """The job's gate; ``lease``: for a run on a warm instance, which a trial waiting for one
        (``finish.for_warm``) is not held from."""
        if not self._applies(view.job, view.spec):
            return None
        if self._loaded is None or self._loaded[0].now != now:
            with self.store.read() as s:
                self._loaded = self._load(s, now)
        (ledger, sweeps), job = self._loaded, view.job
        prune = self._prune(job) if job.status == JobStatus.RUNNING and job.sweep_id in self._rules else None
        wait = self._waits.get(job.id or 0)
        if wait is not None and ((lease and for_warm(wait)) or any(
                a.row.status.live and a.row.runway_until and a.row.runway_until > now for a in view.attempts)):
            wait = None  # a run on the warm instance it waits for; within its runway, as the caps' own check
        sweep = sweeps.get(job.sweep_id or -1)
        gate = gate_for(job, view.spec, sweep, ledger, self.policy, prune, wait)
        if job.status in IN_FLIGHT and over(gate):  # a trial ending before the money does runs on (money.finishing)
            if runs_on(gate, job.id or 0, end := self._end(view)):
                log.info("job %s runs on to its estimated end (%s): the money left covers it, not a stop's horizon",
                         job.id, f"{end:%H:%M:%S}")
                return gate_for(job, view.spec, sweep, ledger, self.policy, prune, wait, runs_on=True)
            return with_drain(gate, job.id or 0)
        return gate

    def _end(self, view: JobView) -> datetime | None:
        """When the trial's running attempt should exit (``sweeps.waits.trial_end``); None: not known."""
        live = [a.row for a in view.attempts if a.row.status in (AttemptStatus.LAUNCHED, AttemptStatus.RUNNING)]
        if view.job.sweep_id is None or not live:
            return None
        with self.store.read() as s:
            return trial_end(s, view.job, live[-1], self._max_steps.get(view.job.sweep_id),
                             self._uploads.get((view.job.id or 0, live[-1].number)), self.policy)

    # -- pruning ----------------------------------------------------------------------------------
    def _rules_of(self, active: list[Sweep]) -> None:
        """The pruning rule (and objective mode) of each active sweep that names one."""
        for w in active:
            if w.id is not None and w.id not in self._rule_cache:
                from gpuorch.sweeps.spec import SweepSpec

                spec = SweepSpec.model_validate_json(w.spec)
                self._rule_cache[w.id] = (spec.pruning, w.objective_mode) if spec.pruning is not None else None
                if spec.objective is not None and spec.objective.max_step is not None:
                    self._max_steps[w.id] = spec.objective.max_step
        self._rules = {w.id: r for w in active if w.id is not None and (r := self._rule_cache.get(w.id))}
        self._capped = {w.id for w in active if w.id is not None and w.max_cost is not None}

    def _prune(self, job: Job) -> str | None:
        """Why the sweep's pruning rule stops this running trial now (None: it goes on). Decided
        again only when the trial's history has grown."""
        pruning, mode = self._rules[job.sweep_id or 0]
        mine = parse_history(job.objective_history)
        key = (job.id or 0, len(mine))
        if key not in self._verdicts:
            if job.sweep_id not in self._histories:
                with self.store.read() as s:
                    rows = s.exec(select(Job.id, Job.status, Job.objective_history).where(Job.sweep_id == job.sweep_id))
                    self._histories[job.sweep_id or 0] = [
                        TrialHistory(jid or 0, "finished" if st == JobStatus.SUCCEEDED else
                                     "pruned" if st == JobStatus.PRUNED else "running", parse_history(h))
                        for jid, st, h in rows.all()]
            others = [h for h in self._histories[job.sweep_id or 0] if h.id != job.id]
            me = TrialHistory(job.id or 0, "running", mine)
            self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != key[0]}
            self._verdicts[key] = verdict(pruning.rule, mode, me, others, min_steps=pruning.min_steps,
                                          min_trials=pruning.min_trials, reduction_factor=pruning.reduction_factor)
        return self._verdicts[key]

    def reread(self) -> None:
        """The next gate reads the ledger again: the warm sweep's, after the pass's launches."""
        self._loaded = None

    def after(self, d: A.Decision) -> None:
        """Launches and stops change the ledger: re-read it before the next job's gate."""
        if any(isinstance(x, A.Launch | A.StopCleanly | A.End) for x in d.actions):
            self._loaded = None

    def admit(self, s: Session, job: Job, spec: JobSpec, cand: Candidate, now: datetime) -> str | None:
        """Inside the launch's write transaction: None if ``cand`` may launch, else why not.

        The ledger is read again here, after every launch committed before, so the check and the
        attempt row it admits are one atomic step (SQLite: BEGIN IMMEDIATE; PostgreSQL: a lock).
        """
        if not self._applies(job, spec):
            return None
        if s.get_bind().dialect.name == "postgresql":
            s.connection().execute(text(f"SELECT pg_advisory_xact_lock({BUDGET_LOCK})"))
        ledger, sweeps = self._load(s, now)
        gate = gate_for(job, spec, sweeps.get(job.sweep_id or -1), ledger, self.policy)
        if gate.hold is not None:
            return gate.hold.message
        if not gate.affords(cand):
            return f"launch refused: its worst case ${gate.need(cand):.4f} does not fit the budget"
        return self._unproven(s, job, spec, cand)

    def _unproven(self, s: Session, job: Job, spec: JobSpec, cand: Candidate) -> str | None:
        """A capped sweep bets one trial at a time on spot until it has checkpointed: a spot launch
        of a checkpointing trial waits while another trial's live spot attempt has no checkpoint yet
        (one reclaim, above all one without notice, would take every trial started together with
        nothing saved; bench/sweep.py seed 4: three trials lost together in us-east-1d; and trials
        started together end together, each keeping a horizon reserved: a small cap's last trial
        held at 95%, --small-cap seed 1). Only fresh trials wait (seed 1: the preempted leader
        waited behind a fresh trial and lost its place), rather than go to a dearer market."""
        if job.sweep_id not in self._capped or not cand.spot or spec.checkpoint is None:
            return None
        step = json.loads(job.metrics).get("step") if job.metrics else None
        if job.status == JobStatus.HELD or (isinstance(step, int | float) and step > 0):
            return None  # a trial with progress resumes: it is the one the money is kept for
        other = s.exec(select(Attempt.job_id, Attempt.zone).join(Job, col(Job.id) == col(Attempt.job_id)).where(
            Job.sweep_id == job.sweep_id, Attempt.job_id != job.id, Attempt.status != AttemptStatus.ENDED,
            col(Attempt.spot).is_(True), col(Attempt.last_checkpoint).is_(None))).first()
        if other is None:
            return None
        return (f"waiting: trial {other[0]} of the sweep has no checkpoint yet on spot ({other[1]}); one new "
                "spot trial at a time until it has one")

    def runway_until(self, spec: JobSpec, cand: Candidate, now: datetime) -> datetime:
        """The end of the runway a launch on ``cand`` is admitted with (``Attempt.runway_until``)."""
        ckpt = spec.checkpoint.interval if spec.checkpoint is not None else None
        return now + timedelta(seconds=runway_s(cand.offer.min_billing_s, ckpt, self.policy))

    # -- a clean stop ---------------------------------------------------------------------------
    def stop_cleanly(self, provider: Provider, view: JobView, a: AttemptView, action: A.StopCleanly,
                     now: datetime) -> None:
        """Record the stop (intent first), then ask the agent for its final checkpoint."""
        job_id, until = view.job.id or 0, action.until
        with self.txn(job_id) as (s, job):
            row = s.get(Attempt, a.row.id)
            row.status, row.reason, row.message = AttemptStatus.DRAINING, action.reason, action.message  # type: ignore[union-attr]
            row.notice_at, row.drain_until = now, until  # type: ignore[union-attr]
            job.status, job.message, job.not_before = action.job_status, action.message, action.not_before
            if action.job_status.terminal:
                job.finished_at = now
            events.record(s, now, "stop_requested", f"{action.message}; final checkpoint requested by "
                          f"{until:%H:%M:%S}", job_id=job_id, attempt=action.attempt, reason=action.reason.value)
        try:
            provider.runner(a.instance).request_stop(until.timestamp())  # type: ignore[arg-type]
        except (RunnerUnavailable, NotImplementedError) as e:
            log.info("job %s attempt %s: no clean stop (%s); terminating now", job_id, action.attempt, e)
            with self.txn(job_id) as (s, _):
                s.get(Attempt, a.row.id).drain_until = now  # type: ignore[union-attr]

    # -- observations ----------------------------------------------------------------------------
    def record_billing(self, view: JobView, now: datetime) -> None:
        """Bring each attempt's billed interval to the cloud's record of its instance
        (``gpuorch.money.record.corrections``): the launch time after the launch's first listing,
        the end time after a termination the daemon asked for (recorded at the pass that asked).
        Writes only what differs; most passes write nothing."""
        fixes = [(a.row, f) for a in view.attempts
                 if (f := corrections(a.row, self._observed.get((a.row.provider, a.row.job_id, a.row.number)), now))]
        if not fixes:
            return
        with self.txn(view.job.id or 0) as (s, _):
            for row, f in fixes:
                r = s.get(Attempt, row.id)
                if r is None:
                    continue
                moved = max(abs((v - (aware(getattr(r, k)) or v)).total_seconds()) for k, v in f.items())
                for name, value in f.items():
                    setattr(r, name, value)
                if moved >= 1.0:  # a launch's call latency is not news; an outage's end time is
                    events.record(s, now, "billing", "billed " + ", ".join(
                        f"{'from' if k == 'launched_at' else 'until'} {v.isoformat(timespec='milliseconds')}"
                        for k, v in f.items()) + " (the cloud's record)", job_id=row.job_id, attempt=row.number)

    def record_finished_ends(self, now: datetime) -> None:
        """``record_billing`` for the attempts of finished jobs, which no pass views any more: an
        instance whose termination failed and that the orphan sweep stopped later, or one the
        cloud ended after the job's last pass, is billed to the cloud's end. Each ended instance
        is checked once per daemon life; written without a lease (no daemon holds a finished
        job), and every daemon would write the same cloud time."""
        observed = self._observed
        # a set difference in C first: a held job's attempts not ended are billed by its view
        due = {k: i for k in observed.keys() - self._live
               if reported_end(i := observed[k]) is not None and (k, i.ended_at) not in self._settled}
        if not due:
            return
        ids, fixes = sorted({k[1] for k in due}), {}
        with self.store.read() as s:  # most looks find nothing to fix: no write lock for them
            for k in range(0, len(ids), 500):
                for r in s.exec(select(Attempt).join(Job, col(Job.id) == col(Attempt.job_id)).where(
                        col(Attempt.job_id).in_(ids[k:k + 500]), col(Job.status).in_(TERMINAL),
                        Attempt.status == AttemptStatus.ENDED)):
                    if f := corrections(r, due.get((r.provider, r.job_id, r.number)), now):
                        fixes[r.id] = f
        if fixes:
            with self.store.write() as s:
                for attempt_id, f in fixes.items():
                    if (stored := s.get(Attempt, attempt_id)) is not None:
                        for name, value in f.items():
                            setattr(stored, name, value)
        if len(self._settled) > 1_000_000:  # a daemon life that long: start over (re-checking is harmless)
            self._settled.clear()
        self._settled.update((k, i.ended_at) for k, i in due.items())

    def track_prices(self, view: JobView, offers: Sequence[Offer], seen_at: datetime | None) -> None:
        """Record a new spot price for each live spot attempt whose market's offer moved: the
        catalog lists one instance's price, a gang's attempt bills every node (``price_move``)."""
        if seen_at is None:
            return
        if self._spot is None or self._spot[0] is not offers:  # once per catalog refresh, not per job
            self._spot = (offers, {(o.provider, o.zone, o.instance_type): o.spot_price_per_hour for o in offers})
        spot, nodes = self._spot[1], view.spec.nodes
        moves = [(a.row, m) for a in view.attempts if a.row.spot and a.row.status != AttemptStatus.ENDED
                 if (m := price_move(a.row, spot.get((a.row.provider, a.row.zone, a.row.instance_type)), nodes,
                                     seen_at))]
        if not moves:
            return
        with self.txn(view.job.id or 0) as (s, _):
            for row, (at, price) in moves:
                r = s.get(Attempt, row.id)
                old = current_price(r)  # type: ignore[arg-type]
                r.price_changes = with_price_change(r, at, price)  # type: ignore[union-attr,arg-type]
                each = f" ({nodes} nodes at ${price / nodes:.4f}/h)" if nodes > 1 else ""
                events.record(s, at, "spot_price", f"spot price ${old:.4f}/h -> ${price:.4f}/h{each}",
                              job_id=row.job_id, attempt=row.number, price_per_hour=price)

    def collect_metrics(self, job_id: int, row: Attempt, runner: Runner, now: datetime) -> None:
        """Read the attempt's new metrics lines and merge them into the job's latest metrics."""
        try:
            data, _ = runner.read_metrics(row.metrics_offset, METRICS_READ)
        except (RunnerUnavailable, NotImplementedError, OSError):
            return
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < METRICS_READ:
            return  # nothing new, or half a line: read it whole next time
        cut = cut or len(data)  # one line longer than a read: skip it
        with self.txn(job_id) as (s, job):
            r = s.get(Attempt, row.id)
            if r is None or r.metrics_offset != row.metrics_offset:
                return
            r.metrics_offset += cut
            lines = metric_lines(data[:cut])  # never parse, keep or plot a line over agent.limits
            merged = merge_lines(json.loads(job.metrics) if job.metrics else {}, lines)
            if merged is not None:
                job.metrics, job.metrics_at = json.dumps(merged), now
                self._record_objective(s, job, lines, now)
        if self.metrics_sink is not None:  # the history the dashboard plots (LogMirror.append_metrics)
            self.metrics_sink(job_id, row.number, lines)

    def _record_objective(self, s: Session, job: Job, data: bytes, now: datetime) -> None:
        """A trial's objective values by step, for its sweep's pruning rule."""
        if job.sweep_id is None:
            return
        sweep = s.get(Sweep, job.sweep_id)
        if sweep is None or sweep.objective_metric is None:
            return
        history = extend_history(job.objective_history, steps_of(data, sweep.objective_metric), now.timestamp())
        if history is not None:
            job.objective_history = history

    # -- sweeps ------------------------------------------------------------------------------------
    def finish_sweeps(self, now: datetime, version: int | None = None) -> None:
        """Mark active sweeps whose trials have all finished as done. ``version``: the store's
        ``data_version`` read before this pass read anything; while it is the one at which no
        sweep was found done, none can be (nothing was committed since)."""
        if version is not None and version == self._no_sweep_done_at:
            return
        unfinished = exists().where(and_(col(Job.sweep_id) == col(Sweep.id), col(Job.status).not_in(TERMINAL)))
        done = select(Sweep).where(Sweep.status == SweepStatus.ACTIVE, ~unfinished)
        with self.store.read() as s:
            if s.exec(done).first() is None:  # the usual case: no write lock taken
                self._no_sweep_done_at = version
                return
        with self.store.write() as s:
            for sw in s.exec(done):
                counts = dict(s.exec(select(col(Job.status), func.count()).where(
                    Job.sweep_id == sw.id).group_by(col(Job.status))).all())
                sw.status, sw.finished_at = SweepStatus.DONE, now
                sw.message = ", ".join(f"{n} {st.value}" for st, n in sorted(counts.items()))
                events.record(s, now, "sweep_done", f"sweep {sw.name} done: {sw.message}", sweep_id=sw.id)

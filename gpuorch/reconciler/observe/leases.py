"""Job leases: which daemon may act on a job, and until when (token + expiry on the job row).

Several daemons share one PostgreSQL store; each job is worked on by at most one at a time.
A lease is ``(lease_owner, lease_expires)`` on the ``job`` row. The rules (docs/ha.md argues
them through):

- ``claim`` takes jobs that need attention and are free, expired or already ours, renewing all of
  ours (unexpired) once one has less than ``RENEW_WHEN_LEFT`` of its lease left, in one writing
  transaction whose candidate rows are locked ``FOR UPDATE SKIP LOCKED``. When there is nothing to take or renew
  (most passes), it only reads: no write lock, no row written.
- Every write a daemon makes on a job locks the job's row and checks that the lease is still
  ours and unexpired (``held``), so nothing a deposed daemon decided is ever committed after
  another daemon's claim.
- A pass claims before it lists any instance, so what a new owner observes postdates every
  write of the previous one.
- Expiry is judged by each daemon's own clock. The store stays consistent whatever the clocks
  say (a write checks the owner under the row lock, and a claim commits only on an unlocked
  row); skew only moves takeovers earlier or later, so keep hosts in NTP sync well within it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from operator import is_, itemgetter
from typing import cast

from sqlalchemy import ColumnElement, String, Update, and_, func, not_, or_, type_coerce, update
from sqlalchemy.orm import Mapped
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select, SelectOfScalar

from gpuorch.jobs import events
from gpuorch.store import Store
from gpuorch.store.bulk import among, among_chunks
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus

TERMINAL = [s.value for s in JobStatus if s.terminal]
RENEW_WHEN_LEFT = 2 / 3  # a held lease is renewed once less than this share of it is left


def held_rows(s: Session, stmt: Select[int, bool, str]) -> list[tuple[int, bool, datetime]]:
    """The claim's light loader: ``(id, cancel_requested, lease_expires)`` of every held job, each
    pass, through SQLAlchemy Core rather than the ORM, with the expiry read raw and parsed once per
    distinct value (a bulk renewal gives every held job the same one): a thousand ORM rows and
    datetime conversions a pass were a tenth of a steady pass."""
    parsed: dict[object, datetime] = {}
    out = []
    for job_id, cancel, raw in s.connection().execute(stmt).all():  # one fetchall: a fetch a row cost 6 us
        when = parsed.get(raw)
        if when is None:
            when = parsed[raw] = _aware(raw)
        out.append((job_id, bool(cancel), when))
    return out


def _aware(raw: object) -> datetime:
    """A raw ``lease_expires`` as ``models.UTCDateTime`` returns it: SQLite hands back its stored
    text (naive UTC), PostgreSQL's driver a datetime."""
    when = raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw))
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class _Kept:
    version: int  # Store.data_version before the claim read anything
    until: datetime  # Leases._until
    queued: int | None
    truncated: bool
    ids: list[int]  # of the jobs held, in id order
    jobs: list[Job]  # their rows, in the same order
    soonest: datetime | None
    others: datetime  # when another daemon's lease expires or a queued job's not_before passes (_until)


class LeaseLost(Exception):
    """Another daemon owns the job now, or this daemon's lease expired: drop its remaining work."""


class Leases:
    def __init__(self, store: Store, owner: str, lease_s: float) -> None:
        self.store, self.owner, self.lease_s = store, owner, lease_s
        # Jobs the last claim took anew (free, expired, or another daemon's), not just renewed:
        # someone else may have written them since this daemon last looked.
        self.taken: set[int] = set()
        self.truncated = False  # the last claim's ``queued`` limit left queued jobs out
        self._kept: _Kept | None = None  # the last claim's answer while the store is unchanged (_same)
        self.ids: list[int] = []  # the ids of the jobs the last claim returned, in its order (no ORM read)
        self.soonest: datetime | None = None  # the first of their lease expiries, when known without one
        self.version: int | None = None  # Store.data_version as the last claim read it, before any read
        self.unchanged = False  # the last claim returned the previous one's very rows, none taken (``_note``)
        self._last: list[Job] | None = None  # the previous claim's answer

    def held(self, job: Job | None, now: datetime) -> bool:
        return (job is not None and job.lease_owner == self.owner and job.lease_expires is not None
                and job.lease_expires > now)

    def claim(self, now: datetime, last_pass_at: datetime | None = None,
              known: Mapping[int, Job] | None = None, queued: int | None = None) -> list[Job]:
        """Lease every job that needs attention and is free, expired or ours (renewing ours when due).

        Candidate rows are locked ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (SQLite's BEGIN
        IMMEDIATE serialises all writers anyway): a row another daemon is writing right now stays
        with it this pass, and two claimers never wait for, or deadlock on, each other. A job
        taken from a daemon whose lease ran out gets a ``lease_taken_over`` event that records
        the expiry and ``last_pass_at`` (this daemon's previous pass), so "taken over at the
        first pass after expiry" can be checked. Returns the jobs this daemon holds unexpired
        leases on, by id (an expired one of ours that another daemon is taking right now is not).

        ``known``: job rows the caller read in earlier passes and has not written since; those
        this daemon held throughout and nobody asked to cancel are returned as they are (with
        their lease expiry brought up to date) instead of read again.

        ``queued``: claim at most this many of the jobs that wait for their first launch (queued,
        due, not cancelled, no live attempt), the oldest first (``head``), of those free or ours;
        every other job that needs attention is claimed as before. A pass does not launch more
        than its budget, so the rest of a long queue costs it nothing, and stays free for another
        daemon. ``truncated`` says whether the limit left such jobs out.
        """
        version = self.version = self.store.data_version()  # before any read: a later commit shows next claim
        kept, self._kept = self._kept, None
        if kept is not None and self._valid(kept, version, known, queued):
            if now < kept.until:
                return self._note(self._keep(kept))
            if now < kept.others and (renewed := self._renew(kept, now, queued)) is not None:
                return self._note(renewed)
        # A row read back always has its primary key: ids selected here are ``int``, never None.
        job_id, owner, expires = cast(Mapped[int], col(Job.id)), col(Job.lease_owner), col(Job.lease_expires)
        due = now + timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        free = or_(owner.is_(None), expires < now, and_(owner == self.owner, expires < due))
        self.taken, self.truncated = set(), False
        wanted, first = self._wanted(now, queued)
        with self.store.read() as s:  # the usual pass: nothing to take or renew, no write lock
            if first is not None and queued is not None:
                wanted = self._head(s, now, queued, first, wanted)
            # Whether any is due, and (only then: PostgreSQL and SQLite evaluate the second EXISTS
            # lazily) whether ours are: one statement, one round trip.
            due_any_q = select(job_id).where(wanted).where(free).exists()
            renew_q = select(job_id).where(wanted, owner == self.owner, expires > now, expires < due).exists()
            due_any, renewing = s.exec(select(due_any_q, and_(due_any_q, renew_q))).one()
        if due_any:
            # Our unexpired leases, all of them once one is due (so that they stay due together, not
            # in groups a pass apart): one UPDATE by predicate (nothing to note of them); the rest of
            # ``free`` row by row, skipping rows another writer holds.
            mine = and_(owner == self.owner, expires > now)
            rest = or_(owner.is_(None), expires.is_(None), not_(mine))  # NULL-safe: no lease of ours
            self._take(select(job_id, owner, expires).where(wanted).where(free, rest), now, last_pass_at,
                       update(Job).where(wanted, mine).values(lease_expires=now + timedelta(seconds=self.lease_s))
                       .execution_options(synchronize_session=False) if renewing else None)
        return self._note(self._mine(version, now, wanted, known, queued, not due_any))

    def _head(self, s: Session, now: datetime, queued: int, first: SelectOfScalar[int],
              wanted: ColumnElement[bool]) -> ColumnElement[bool]:
        """Set ``truncated`` (the head reaches the limit: it has a ``queued``-th row) and return the
        claim's condition for the rest of the claim. PostgreSQL: the head's ids are read here, once,
        and every later statement names them in one array parameter, instead of the head's subquery
        in each (a scan of the job table, and of its attempts, apiece: five a claim). A job the
        head gains or loses meanwhile is seen by the next claim, as one a moment later would be."""
        if self.store.dialect != "postgresql":
            self.truncated = s.exec(first.offset(max(0, queued - 1)).limit(1)).first() is not None
            return wanted
        ids = list(s.exec(first))
        self.truncated = len(ids) >= queued
        return self._wanted(now, queued, ids)[0]

    def _wanted(self, now: datetime, queued: int | None,
                head: list[int] | None = None) -> tuple[ColumnElement[bool], SelectOfScalar[int] | None]:
        """The claim's condition on the jobs that need attention, and the queue's head (``claim``):
        of the jobs waiting for their first launch, only the first ``queued`` of those free or ours
        (``head``: their ids, as read by ``_head``; else a subquery of the statement)."""
        job_id, owner, expires = cast(Mapped[int], col(Job.id)), col(Job.lease_owner), col(Job.lease_expires)
        busy = select(Attempt.job_id).where(Attempt.status != AttemptStatus.ENDED)
        wanted = or_(col(Job.status).not_in(TERMINAL), job_id.in_(busy))
        if queued is None:
            return wanted, None
        head_q = and_(col(Job.status) == JobStatus.QUEUED, col(Job.cancel_requested).is_(False), job_id.not_in(busy),
                      or_(col(Job.not_before).is_(None), col(Job.not_before) <= now))
        first = select(job_id).where(head_q, or_(owner.is_(None), expires < now, owner == self.owner)) \
            .order_by(job_id).limit(queued).correlate(None)  # its own scan of the table, not the row's
        among_head = job_id.in_(first) if head is None else among(job_id, head, self.store.dialect)
        return and_(wanted, or_(not_(head_q), among_head)), first

    def _mine(self, version: int | None, now: datetime, wanted: ColumnElement[bool], known: Mapping[int, Job] | None,
              queued: int | None, kept: bool) -> list[Job]:
        """The jobs this daemon holds unexpired leases on, by id; rows in ``known`` reused (``claim``).
        ``kept``: nothing was taken, so the answer holds while the store is unchanged (``_same``)."""
        job_id, owner, expires = cast(Mapped[int], col(Job.id)), col(Job.lease_owner), col(Job.lease_expires)
        mine = (owner == self.owner, expires > now, wanted)
        with self.store.read() as s:  # also ours: rows we hold that someone had locked just now
            if known is None:
                held = list(s.exec(select(Job).where(*mine).order_by(job_id)))
                self.ids, self.soonest = [j.id for j in held], None  # type: ignore[misc]
                return held
            # Rows known from an earlier read are reused unless taken anew or cancelled since
            # (a user's cancel request is the one write to a held job not made by its holder).
            light = held_rows(s, select(job_id, col(Job.cancel_requested), type_coerce(expires, String()))
                              .where(*mine).order_by(job_id))
            stale = [i for i, cancel, _ in light
                     if i in self.taken or (j := known.get(i)) is None or j.cancel_requested != cancel]
            read = {j.id: j for cond in among_chunks(job_id, stale, self.store.dialect)
                    for j in s.exec(select(Job).where(cond))}
        jobs = []
        for i, _, lease_expires in light:
            job = read.get(i) or known[i]
            if job.lease_expires != lease_expires:  # renewed: as loaded (a model's set costs 12 us)
                set_committed_value(job, "lease_expires", lease_expires)
            jobs.append(job)
        self.ids = [i for i, _, _ in light]
        self.soonest = min((t for _, _, t in light), default=None)
        if version is not None and kept:  # nothing taken: this answer holds while the store is unchanged
            renew_at, others = self._until(now, light)
            self._kept = _Kept(version, min(renew_at or others, others), queued, self.truncated, self.ids, jobs,
                               self.soonest, others)
        return jobs

    def _valid(self, kept: _Kept, version: int | None, known: Mapping[int, Job] | None, queued: int | None) -> bool:
        """Whether the last claim's answer holds but for time: nobody committed since
        (``Store.data_version``), the same queued limit, and every row still the one the caller
        keeps (``known``). It holds until ``kept.until``: a lease or a queued job's ``not_before``
        it depends on comes due (``_until``)."""
        return version is not None and kept.version == version and kept.queued == queued and known is not None \
            and all(map(is_, map(known.get, kept.ids), kept.jobs))

    def _keep(self, kept: _Kept) -> list[Job]:
        self._kept = kept
        self.taken, self.truncated, self.ids, self.soonest = set(), kept.truncated, kept.ids, kept.soonest
        return list(kept.jobs)

    def _renew(self, kept: _Kept, now: datetime, queued: int | None) -> list[Job] | None:
        """The last claim's answer with its leases renewed, when only their renewal came due since
        (``_valid``, before ``kept.others``): nothing read, one UPDATE of every lease of ours the
        claim would renew. None (the full claim) unless it renewed exactly the answer's rows."""
        owner, expires = col(Job.lease_owner), col(Job.lease_expires)
        until = now + timedelta(seconds=self.lease_s)
        wanted, _ = self._wanted(now, queued)
        with self.store.write() as s:
            renewed = s.connection().execute(update(Job).where(wanted, owner == self.owner, expires > now)
                                             .values(lease_expires=until)).rowcount
        if renewed != len(kept.jobs):
            return None
        for job in kept.jobs:
            set_committed_value(job, "lease_expires", until)
        renew_at = until - timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        return self._keep(replace(kept, until=min(renew_at, kept.others), soonest=until))

    def _until(self, now: datetime, light: list[tuple[int, bool, datetime]]) -> tuple[datetime | None, datetime]:
        """When a claim's answer may change with no write: (our first lease comes due for renewal,
        None if none is held; another daemon's lease expires, free to take, or a queued job's
        ``not_before`` passes, at the latest a lease from now)."""
        renew = timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        owner, expires, not_before = col(Job.lease_owner), col(Job.lease_expires), col(Job.not_before)
        with self.store.read() as s:
            times = [t for t in (
                s.exec(select(func.min(expires)).where(owner.is_not(None), owner != self.owner, expires > now)).one(),
                s.exec(select(func.min(not_before)).where(col(Job.status) == JobStatus.QUEUED, not_before > now)).one(),
            ) if t is not None]
        return (min(map(itemgetter(2), light)) - renew if light else None,
                min(times, default=now + timedelta(seconds=self.lease_s)))

    def _note(self, jobs: list[Job]) -> list[Job]:
        """Set ``unchanged``: the claim holds the very row objects the last one returned, none
        taken anew. A held row is read again whenever anyone but a renewal may have written it
        (taken, cancel requested: ``_mine``; written by this daemon: ``HeldRows.drop``), so its
        job row and attempt rows are then what they were, whatever else was committed."""
        last, self._last = self._last, jobs
        self.unchanged = last is not None and not self.taken and len(jobs) == len(last) and all(map(is_, jobs, last))
        return jobs

    def _take(self, candidates: Select[int, str | None, datetime | None], now: datetime,
              last_pass_at: datetime | None, renewal: Update | None) -> None:
        """Lease the ``(id, lease_owner, lease_expires)`` rows ``candidates`` selects that no other
        writer holds locked right now, noting in ``taken`` those that were not already ours; and
        renew ours with ``renewal`` in the same transaction (a thousand leases renewed every 20 s
        were a SELECT of every row and an UPDATE of an IN list of their ids)."""
        with self.store.write() as s:
            if renewal is not None:
                s.exec(renewal)
            rows = s.exec(candidates.order_by(col(Job.id)).with_for_update(skip_locked=True, of=Job)).all()
            if rows:
                s.exec(update(Job).where(among(col(Job.id), [r[0] for r in rows], self.store.dialect))
                       .values(lease_owner=self.owner, lease_expires=now + timedelta(seconds=self.lease_s)))
            self.taken = {job_id for job_id, previous, expired in rows
                          if not (previous == self.owner and expired is not None and expired > now)}
            for job_id, previous, expired in rows:
                if previous not in (None, self.owner):
                    events.record(s, now, "lease_taken_over", f"{self.owner} took over from {previous}, whose lease "
                                  f"expired at {expired:%H:%M:%S}", job_id=job_id, previous_owner=previous,
                                  owner=self.owner, expired_at=expired, last_pass_at=last_pass_at)

    def renew(self, now: datetime) -> None:
        """Extend the unexpired leases this daemon holds, so a long pass does not outlive them.

        An expired lease is never revived here (another daemon may be taking it); the next claim
        gets it back if nobody did.
        """
        with self.store.write() as s:
            s.exec(update(Job).where(col(Job.lease_owner) == self.owner).where(col(Job.lease_expires) > now)
                   .values(lease_expires=now + timedelta(seconds=self.lease_s)))

    def check(self, job_id: int, now: datetime) -> None:
        """Raise LeaseLost unless the job is still held. A read: it guards side effects that write
        nothing (those are idempotent; this keeps a deposed daemon from acting on a stale view)."""
        with self.store.read() as s:
            if not self.held(s.get(Job, job_id), now):
                raise LeaseLost(job_id)

    def others(self, now: datetime) -> set[int]:
        """Ids of jobs another daemon holds an unexpired lease on."""
        with self.store.read() as s:
            return set(s.exec(select(cast(Mapped[int], col(Job.id))).where(col(Job.lease_owner).is_not(None))
                              .where(col(Job.lease_owner) != self.owner).where(col(Job.lease_expires) > now)))

    def expire_of(self, owner: str, now: datetime) -> int:
        """End now the unexpired leases of ``owner``, a daemon known to be dead (its process lock
        on this host is free: ``ops.presence``); how many. The next claim takes them over as it
        takes any expired lease, with the ``lease_taken_over`` event that names it."""
        if owner == self.owner:
            return 0
        with self.store.write() as s:
            rows = s.exec(update(Job).where(col(Job.lease_owner) == owner).where(col(Job.lease_expires) > now)
                          .values(lease_expires=now))
            return int(rows.rowcount or 0)

    def release(self) -> None:
        """Give up every lease (clean shutdown): another daemon may take the jobs at once."""
        with self.store.write() as s:
            s.exec(update(Job).where(col(Job.lease_owner) == self.owner).values(lease_owner=None, lease_expires=None))

"""The held jobs' rows and parsed specs, kept across passes while nobody wrote them.

A steady pass must not reload a thousand job and attempt rows through the ORM, nor parse a
thousand specs: ``HeldRows`` keeps them. Attempt rows are written only by the daemon holding the
job's lease, through ``Reconciler._txn``, which calls ``drop``; a job this daemon did not hold
without a break since it last read them (``Leases.taken``: free, expired or another daemon's
until this claim) is read again. So a cached row is the row in the store, and the same object
from pass to pass (``steady.py`` relies on that).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import col, select

from gpuorch.jobs.spec import JobSpec, load_stored
from gpuorch.reconciler.observe.leases import Leases
from gpuorch.store import Store
from gpuorch.store.bulk import among_chunks
from gpuorch.store.models import Attempt, AttemptStatus, Job

IN_CHUNK = 500  # ids per IN (...) list: well under every database's parameter limit
SPECS_KEPT = 512  # parsed specs ``Specs`` keeps by value; it starts over beyond

# A stored spec is compact JSON in field order (``JobSpec.model_dump_json``): a few top-level
# scalars (the Lifetime fields), then the name. Matched only so, the name is the top-level one;
# its pattern is the name validator's, so a name taken from here needs no check.
_SCALAR = r'"[a-z_]+":(?:null|true|false|-?[0-9][0-9.eE+-]*|"[a-z]*"),'
_HEAD = re.compile(r'\{(?:' + _SCALAR + r')*"name":"([a-z0-9][a-z0-9-]{0,62})",')
_NAME_FIELD = len('"name":"')


class UnreadableSpec(Exception):
    """A stored job spec this gpuorch cannot load; the message is the first error, on one line."""


def first_error(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        err = errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'spec'}: {err['msg']}"
    return str(e)


def light(row: Attempt) -> Attempt:
    """``row`` without its stored offer (``Attempt.offer``, half a kilobyte of JSON) unless it is
    still ``REQUESTED``: only such a row is launched again (``Relaunch``: ``launching.attempt_offer``
    reads it), a launched row never is, and these rows are never written back (every write reads
    its row afresh in ``Reconciler._txn``). Set as the loaded value, so the row stays clean."""
    if row.offer is not None and row.status != AttemptStatus.REQUESTED:
        set_committed_value(row, "offer", None)
    return row


class Specs:
    """Stored specs parsed once per value: the jobs of a sweep or a queue often differ only in
    their names, so the key is the text without its name, and a job whose spec is another's but
    for the name gets that parsed spec with its own name (a copy sharing every other value: the
    models are frozen). No validator of ``JobSpec`` reads the name; one that did would have to be
    run again here. A text not in the stored form is parsed as it is (``load_stored``)."""

    def __init__(self, most: int = SPECS_KEPT) -> None:
        self.most = most
        self._by_rest: dict[str, JobSpec] = {}

    def load(self, text: str) -> JobSpec:
        """``load_stored(text)``, equal in every value; its ValueError for an unreadable text."""
        m = _HEAD.match(text)
        if m is None:
            return load_stored(text)
        name = m.group(1)
        rest = text[:m.start(1) - _NAME_FIELD] + text[m.end(1) + 2:]  # without '"name":"<name>",'
        got = self._by_rest.get(rest)
        if got is None:
            spec = load_stored(text)
            if len(self._by_rest) >= self.most:
                self._by_rest.clear()
            self._by_rest[rest] = spec
            return spec
        if got.name == name:
            return got
        spec = got.model_copy(update={"name": name})
        object.__setattr__(spec, "__pydantic_fields_set__", got.__pydantic_fields_set__)  # every field's, shared
        return spec


class HeldRows:
    def __init__(self, store: Store, leases: Leases) -> None:
        self.store, self.leases = store, leases
        self.attempts: dict[int, list[Attempt]] = {}  # kept across passes: see held_attempts
        self.jobs: dict[int, Job] = {}  # job rows kept across passes: see Leases.claim(known=)
        self._specs: dict[int, tuple[str, JobSpec]] = {}  # parsed specs by job id, with their text
        self._parsed = Specs()  # by value, across jobs
        self._live: dict[int, tuple[list[Attempt], tuple[tuple[str, int, int], ...]]] = {}  # see live_keys

    def load_attempts(self, job_ids: Sequence[int]) -> dict[int, list[Attempt]]:
        """Every attempt of these jobs, by job, in number order: one query (SQLite: per ``IN_CHUNK``
        jobs; ``store.bulk.among_chunks``)."""
        out: dict[int, list[Attempt]] = {i: [] for i in job_ids}
        with self.store.read() as s:
            for cond in among_chunks(col(Attempt.job_id), list(job_ids), self.store.dialect, IN_CHUNK):
                for row in s.exec(select(Attempt).where(cond).order_by(Attempt.job_id, Attempt.number)):  # type: ignore[arg-type]
                    out[row.job_id].append(light(row))
        return out

    def held_attempts(self, ids: list[int]) -> dict[int, list[Attempt]]:
        """The attempts of the jobs held (by id), from the cache where it is good, else in one query."""
        fresh, kept = self.leases.taken, self.attempts
        out = {i: rows for i in ids if (rows := kept.get(i)) is not None and i not in fresh}
        if len(out) < len(ids):
            out.update(self.load_attempts([i for i in ids if i not in out]))
        self.attempts = dict(out)
        return out

    def live_keys(self, attempts: dict[int, list[Attempt]]) -> set[tuple[str, int, int]]:
        """(provider, job id, number) of every attempt not ended, worked out again only for a
        job whose list of rows is not the one kept (a kept list is never changed in place)."""
        out: set[tuple[str, int, int]] = set()
        memo = self._live
        for job_id, rows in attempts.items():
            got = memo.get(job_id)
            if got is None or got[0] is not rows:
                got = memo[job_id] = (rows, tuple((r.provider, r.job_id, r.number) for r in rows
                                                  if r.status != AttemptStatus.ENDED))
            out.update(got[1])
        if len(memo) > 2 * len(attempts) + 100:
            self._live = {k: v for k, v in memo.items() if k in attempts}
        return out

    def drop(self, job_id: int) -> None:
        """The job is being written (or was, in the background): read its rows afresh next pass."""
        self.attempts.pop(job_id, None)
        self.jobs.pop(job_id, None)

    def spec(self, job: Job) -> JobSpec:
        """The job's parsed spec, parsed again only when its text changed. UnreadableSpec when
        this gpuorch cannot load it."""
        cached = self._specs.get(job.id or 0)
        if cached is not None and cached[0] == job.spec:
            return cached[1]
        try:
            spec = self._parsed.load(job.spec)  # the values of model_validate_json, in half the memory
        except ValueError as e:  # pydantic's ValidationError is one
            raise UnreadableSpec(first_error(e)) from None
        self._specs[job.id or 0] = (job.spec, spec)
        return spec

    def forget(self, held: set[int | None]) -> None:
        """Drop the parsed specs of jobs this daemon no longer works on."""
        if not self._specs.keys() <= held:  # a subset test (in C) most passes; rebuilt only when one left
            self._specs = {k: v for k, v in self._specs.items() if k in held}

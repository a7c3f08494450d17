"""Agent status reads off the pass: a hung host holds only its own job.

Observing a job means asking its runner for the agent's status, which over SSH may take a
connection's retries or an I/O timeout (a minute) when a host hangs (capability ``runners_may_block``;
the local, sim and fake runners read files or memory and answer inline). The pass hands every read
it needs to a bounded pool at once (``read``), waits for them together at most ``wait_s``, and
goes on: a job whose read is still out is left alone this pass (``pending``), and the read goes on
in the background. Its answer, once in, is what a later pass observes (at most a pass old; a new
read is not started while one is out, so a slow host never piles reads up).

A runner that raises is just not reachable (``RUNNER_ERRORS``): decide still runs for its job,
so the boot timeout still ends an instance whose runner never answers. One that refuses the
daemon's credentials (``AuthError``) is told too, as ``provider.credentials_failed``, once per
provider an hour (``credentials.CredentialAlarm``): a person must mend them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuorch.agent.protocol import AgentStatus
from gpuorch.errors import AuthError, ProviderError
from gpuorch.provider.port import Instance, Provider
from gpuorch.runners.port import Runner, RunnerUnavailable, StatusValue, status_value
from gpuorch.store.models import Attempt, AttemptStatus

if TYPE_CHECKING:
    from gpuorch.reconciler.observe.credentials import CredentialAlarm

log = logging.getLogger("gpuorch.reconciler")

# What a runner call may raise when the instance cannot be reached, or the runner cannot do it:
# "not reachable" for decide, never a failed pass.
RUNNER_ERRORS = (RunnerUnavailable, ProviderError, NotImplementedError, OSError)


ReadKey = tuple[str, int, int, str]  # provider, job id, attempt number, instance id


class Read(NamedTuple):
    """A finished read: the runner (None if none could be made), the agent's status and its
    ``value`` (``status_value``, taken at the read: what the steady pass compares, never the
    status object itself, which a runner may refresh in place). ``new``: False when a batched
    read's answer was the very object of the provider's previous answer for the instance and its
    status's value had not changed since, i.e. none of the agent's files (status, log, metrics)
    changed (``Provider.agent_statuses``); then the log and metrics need no look (``pulls.Pulls``)."""

    runner: Runner | None
    agent: AgentStatus | None
    reachable: bool
    new: bool = True
    value: StatusValue | None = None


UNREACHABLE = Read(None, None, False)
READING = "reading the agent's status"  # what the provider refused (CredentialAlarm.refused's ``doing``)


def _refused(alarm: CredentialAlarm | None, provider: str, e: AuthError) -> None:
    log.info("%s refused the credentials while %s: %s", provider, READING, e)  # every pass: the alarm tells once
    if alarm is not None:
        alarm.refused(provider, READING, e)


def read_status(runner_of: Callable[[Instance], Runner], instance: Instance,
                alarm: CredentialAlarm | None = None, provider: str | None = None) -> Read:
    """Ask ``runner_of(instance)`` for its agent's status (``Provider.runner``). ``alarm``: told
    when ``provider`` (the configured name; default the instance's) refuses the credentials (the
    read is then not reachable, as after any error)."""
    try:
        runner = runner_of(instance)
        status = runner.status()
        return Read(runner, status, True, True, status_value(status))
    except AuthError as e:
        _refused(alarm, provider or instance.provider, e)
        return UNREACHABLE
    except RUNNER_ERRORS as e:
        log.debug("runner not reachable: %s", e)
        return UNREACHABLE


_MISSING = object()  # no answer for an instance (batch_reads)


def batch_reads(provider: Provider, wanted: Sequence[tuple[ReadKey, Instance]],
                answers: dict[ReadKey, tuple[object, Read]] | None = None,
                alarm: CredentialAlarm | None = None) -> dict[ReadKey, Read]:
    """This pass's reads of ``provider``'s agents in one ``agent_statuses`` call, by read key (a
    provider without the capability ``agent_statuses``, or whose call fails: none, and each is read on its own).
    ``answers``: the provider's raw answers of the previous call, by key, each with its Read that
    is not ``new``, replaced by this call's: an answer that is the same object again, its status
    of the same value, gives that Read (the same object again: nothing is made for an agent that
    wrote nothing); a status refreshed in place has a new value, so a new Read."""
    if not provider.capabilities.agent_statuses or not wanted:
        return {}
    try:
        got: Mapping[str, Any] = provider.agent_statuses([inst for _, inst in wanted])
    except AuthError as e:
        _refused(alarm, wanted[0][0][0], e)
        return {}
    except RUNNER_ERRORS as e:
        log.debug("batched status read failed: %s", e)
        return {}
    out = {}
    before = {} if answers is None else answers
    answer_of, last = got.get, before.get
    for key, inst in wanted:
        if (answer := answer_of(inst.id, _MISSING)) is _MISSING:
            continue
        if answer is None:
            out[key] = UNREACHABLE
            before.pop(key, None)
            continue
        runner, status = answer
        value = None if status is None else status_value(status)  # a booting agent's: no call
        was = last(key)
        if was is not None and was[0] is answer and (was[1].value is value or was[1].value == value):
            out[key] = was[1]
        else:
            out[key] = Read(runner, status, True, True, value)
            before[key] = (answer, Read(runner, status, True, False, value))
    if answers is not None and len(answers) > len(out):  # keys no longer asked: forget them
        for key in answers.keys() - out.keys():
            del answers[key]
    return out



class StatusReads:
    def __init__(self, workers: int = 16, wait_s: float = 5.0, alarm: CredentialAlarm | None = None) -> None:
        self.wait_s, self.alarm = wait_s, alarm  # alarm: told of a provider refusing its credentials
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuorch-observe")
        # Only the pass's thread touches this (the workers run read_status alone): no lock.
        self._out: dict[ReadKey, Future[Read]] = {}
        self.answers: dict[str, dict[ReadKey, tuple[object, Read]]] = {}  # by provider: batch_reads' last answers

    def read(self, wanted: Iterable[tuple[ReadKey, Callable[[Instance], Runner], Instance]]) -> None:
        """Start a read for each key that has none out, then wait for all of them together, at
        most ``wait_s``. Keys not wanted any more are forgotten (their reads finish unheard)."""
        wanted = list(wanted)
        keep = {k for k, _, _ in wanted}
        self._out = {k: f for k, f in self._out.items() if k in keep}
        for key, runner_of, instance in wanted:
            if key not in self._out:
                self._out[key] = self._pool.submit(read_status, runner_of, instance, self.alarm, key[0])
        if self._out:
            wait(self._out.values(), timeout=self.wait_s)

    def pending_jobs(self) -> set[int]:
        """The jobs with a read still out."""
        return {key[1] for key, f in self._out.items() if not f.done()}

    def take(self, key: ReadKey) -> Read | None:
        """The finished read for ``key`` (and forget it: the next pass reads afresh), or None if
        none was asked for or it is still out."""
        f = self._out.get(key)
        if f is None or not f.done():
            return None
        del self._out[key]
        return f.result()  # an error read_status does not expect fails this job's pass, as inline

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def start_reads(providers: Mapping[str, Provider], reads: StatusReads, rows: Iterable[Attempt],
                observed: Mapping[tuple[str, int, int], Instance], live: Iterable[tuple[str, int, int]],
                ask: Callable[[str, Instance | None], Provider | None]) -> tuple[dict[ReadKey, Read], set[int]]:
    """Start a pass's agent status reads from runners that may block (SSH), all at once, and wait
    for them together (at most ``StatusReads.wait_s``). A provider that reads many agents in one
    call (capability ``agent_statuses``) is asked once for its ``live`` attempts (plain keys, no row
    read again); the rest are read with each job's view. Returns (the batched reads, the ids of
    the jobs whose read is still out). ``rows``: the claimed jobs' attempts; ``ask``: the provider
    worth asking for an attempt's agent, if any."""
    batched: dict[ReadKey, Read] = {}
    live = list(live)
    for name, p in providers.items():
        if p.capabilities.runners_may_block or not p.capabilities.agent_statuses:
            continue
        get = observed.get  # a live key is the listing's key: looked up as it is, not rebuilt
        asked = [((name, k[1], k[2], inst.id), inst) for k in live if k[0] == name
                 and (inst := get(k)) is not None and ask(name, inst)]
        batched.update(batch_reads(p, asked, reads.answers.setdefault(name, {}), reads.alarm))
    blocking = {name for name, p in providers.items() if p.capabilities.runners_may_block}  # others answer inline
    wanted = []
    for row in rows if blocking else ():
        # A requested attempt has no agent yet (it starts once the attempt is launched): its found
        # instance is adopted without waiting on a runner that may take a connection's retries.
        if row.provider not in blocking or row.status in (AttemptStatus.ENDED, AttemptStatus.REQUESTED):
            continue
        inst = observed.get((row.provider, row.job_id, row.number))
        if (provider := ask(row.provider, inst)) is not None:
            assert inst is not None
            wanted.append(((row.provider, row.job_id, row.number, inst.id), provider.runner, inst))
    reads.read(wanted)
    return batched, reads.pending_jobs()

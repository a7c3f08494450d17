"""Live jobs nothing touched are not walked (issue 32 item 5): ``memo.QuietJobs.untouched``.

A running job kept quiet last pass, whose job row, attempt rows, steady memo, instance and agent
status are this pass's very objects, is kept as one set: no per-job check at all, its heartbeat
still sent when due. Anything that touches it (its agent writes, its instance changes, a write on
its row) brings it back to the usual checks, which then see the change.

Bare Reconciler: which jobs the memo checks one by one is read off the reconciler object, pass
by pass, and the assembled daemon runs its passes on its own clock.
"""

from __future__ import annotations

from sqlmodel import select
from test_sim_steady import SIM, run_dir, running
from test_sim_steady_unviewed import steady

from gpuorch.agent.protocol import JOB_LOG
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import Attempt, AttemptStatus


def counting_keeps(monkeypatch, rec: Reconciler) -> list[int]:  # type: ignore[no-untyped-def]
    """The jobs the quiet memo checks one by one (``QuietJobs.kept``) from now on."""
    calls: list[int] = []
    kept = rec.memo.quiet.kept

    def counted(job_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(job_id)
        return kept(job_id, *args, **kwargs)

    monkeypatch.setattr(rec.memo.quiet, "kept", counted)
    return calls


def settled(rec: Reconciler, n: int) -> None:
    """Passes until every one of the ``n`` jobs is kept as a set."""
    for _ in range(5):
        rec.run_pass()
        if len(rec.memo.quiet.untouched) == n:
            return
    raise AssertionError(f"not untouched: {rec.memo.quiet.untouched}")


def test_a_quiet_running_job_is_kept_without_a_look_until_something_touches_it(store, make_sim, tmp_path,
                                                                             monkeypatch):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    talking, quiet = running(store, sim, rec, 2, tmp_path)
    steady(rec, 2)
    settled(rec, 2)
    calls = counting_keeps(monkeypatch, rec)
    rec.run_pass()
    assert calls == [] and rec.steady.skipped == 2
    assert rec.memo.quiet.untouched == {talking, quiet}
    with open(run_dir(store, sim, talking) / JOB_LOG, "ab") as f:
        f.write(b"epoch 1\n")
    rec.run_pass()
    assert calls == [talking] and rec.memo.quiet.untouched == {quiet}  # its read was new: looked at
    assert rec.steady.skipped == 2
    with store.read() as s:
        a = s.exec(select(Attempt).where(Attempt.job_id == quiet)).one()
    sim.inject_preemption(a.instance_id, notice_s=60)  # its instance changes: decided at once
    rec.run_pass()
    with store.read() as s:
        assert s.exec(select(Attempt).where(Attempt.job_id == quiet, Attempt.number == 1)).one().status \
            == AttemptStatus.DRAINING
    assert quiet not in rec.memo.quiet.untouched


def test_an_untouched_job_still_gets_its_heartbeat_when_due(store, make_sim, tmp_path, monkeypatch):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    (job_id,) = running(store, sim, rec, 1, tmp_path)
    steady(rec, 1)
    settled(rec, 1)
    calls = counting_keeps(monkeypatch, rec)
    sent: list[int] = []
    real = rec.memo._beat

    def counted(i, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(i)
        return real(i, *args, **kwargs)

    monkeypatch.setattr(rec.memo, "_beat", counted)
    rec.run_pass()
    assert calls == [] and sent == [job_id]  # asked, as for a job kept one by one (Applier.beat: when due)
    assert rec.memo.quiet.untouched == {job_id}

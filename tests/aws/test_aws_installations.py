"""Two gpuorch installations sharing one AWS account (moto): each has its own job 1 attempt 1,
its own instance and volume, and neither's orphan sweeps ever touch the other's resources.

The second installation is what a re-initialised database looks like: a new installation id,
job numbers from 1 again. The runner is scripted (moto's instances run nothing): the job runs
until told to exit. Everything else is the real adapter, reconciler and SQLite stores.
"""

from __future__ import annotations

import pytest
from reconcile_helpers import Installation, passes

from gpuorch.store.models import JobStatus

pytestmark = pytest.mark.aws


def test_installations_sharing_an_account_never_touch_each_others_resources(moto, session, tmp_path, clock) -> None:
    a = Installation(tmp_path / "a.db", session, clock)
    b = Installation(tmp_path / "b.db", session, clock)  # a re-initialised database, say
    assert a.store.installation_id != b.store.installation_id

    ja = a.submit(clock)
    passes(clock, a, b)  # b has no jobs: every aws instance and volume it lists is someone else's
    job_a = a.job(ja)
    assert job_a.status == JobStatus.RUNNING and job_a.volume_id
    [inst_a] = [i for i in a.provider.list_managed() if i.state.alive]
    assert inst_a.owner == a.store.installation_id and a.agents[inst_a.id].started is not None

    jb = b.submit(clock)
    assert jb == ja  # job 1 in both databases
    passes(clock, a, b)
    job_b = b.job(jb)
    assert job_b.status == JobStatus.RUNNING and job_b.volume_id not in (None, job_a.volume_id)
    live = {i.id: i for i in a.provider.list_managed() if i.state.alive}
    assert len(live) == 2 and inst_a.id in live  # b got its own instance, not a's back
    [inst_b] = [i for i in live.values() if i.id != inst_a.id]
    assert (inst_b.owner, inst_b.job_id, inst_b.attempt) == (b.store.installation_id, ja, inst_a.attempt)
    tags_b = {v.id: v.tags for v in b.provider.list_volumes()}
    assert tags_b[job_b.volume_id]["gpuorch:owner"] == b.store.installation_id

    # b finishes its job 1: its instance and volume go; a's job 1 and its resources stay.
    b.agents[inst_b.id].done = True
    passes(clock, a, b, n=6)
    assert b.job(jb).status == JobStatus.SUCCEEDED
    assert a.job(ja).status == JobStatus.RUNNING
    assert [i.id for i in a.provider.list_managed() if i.state.alive] == [inst_a.id]
    assert [v.id for v in a.provider.list_volumes()] == [job_a.volume_id]
    assert a.provider.get(inst_a.id).state.alive

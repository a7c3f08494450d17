"""A launching pass writes each queued job's row once on PostgreSQL (``apply/batch_txn.py``),
where every ``UPDATE`` of a wide job row is a new row version: the drain's largest server cost.

Bare Reconciler: the FakeProvider and a fake clock make the pass exact (tests/kit/job_writes.py).
"""

from __future__ import annotations

import pytest

from gpuorch.store.models import AttemptStatus, JobStatus
from tests.kit.job_writes import launching_pass

pytestmark = pytest.mark.postgres


def test_a_batch_of_launches_writes_each_job_row_once_on_postgresql(store, clock):
    updates, rows, attempts, at = launching_pass(store, clock, queued=30)
    assert len(updates) == 1 and "status=CASE" in updates[0] and "updated_at=" in updates[0]
    assert {j.status for j in rows} == {JobStatus.STARTING} and all(j.updated_at == at for j in rows)
    assert len(attempts) == 30 and {a.status for a in attempts} == {AttemptStatus.LAUNCHED}

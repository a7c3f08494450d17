"""The instance table's mirror: two daemons recording the same new instance at once."""

from __future__ import annotations

from contextlib import contextmanager

from sqlmodel import select

from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler.mirror import InstanceMirror
from gpuorch.store import Store
from gpuorch.store.models import Instance as InstanceRow

INST = Instance(id="fake-1", provider="fake", region="r1", zone="r1-a", instance_type="gpu.a100", spot=True,
                state=InstanceState.RUNNING)
OBSERVED = {("fake", 1, 1): INST}


def test_a_row_written_by_another_daemon_between_read_and_write_does_not_fail_the_pass(store, clock, tmp_path):
    other_store = Store(f"sqlite:///{tmp_path / 'state.db'}")  # the other daemon's connection
    other = InstanceMirror(other_store)
    ours = InstanceMirror(store)
    real_write = store.write

    @contextmanager
    def other_daemon_first():  # the other daemon commits the same new row after our read
        other.update(OBSERVED, {"fake"}, set(), clock.now())
        with real_write() as s:
            yield s

    store.write = other_daemon_first  # type: ignore[method-assign]
    ours.update(OBSERVED, {"fake"}, set(), clock.now())  # must not raise
    store.write = real_write  # type: ignore[method-assign]

    clock.advance(1)
    gone = Instance(**{**INST.model_dump(), "state": InstanceState.TERMINATED})
    ours.update({("fake", 1, 1): gone}, {"fake"}, set(), clock.now())  # reads the table again: updates the row
    with store.read() as s:
        [row] = s.exec(select(InstanceRow)).all()
    assert (row.instance_id, row.state, row.job_id) == ("fake-1", "terminated", 1)
    assert row.terminated_at is not None
    other_store.close()

"""The sim's listing reads only what changed (issue 18, queue drain): counts of record reads, no time."""

from __future__ import annotations

import time
from types import SimpleNamespace

import gpuorch_sim.provider as sim_provider
from gpuorch.provider.localdir import InstanceDir
from gpuorch.provider.port import InstanceState, LaunchRequest
from tests.sim.test_sim_steady import SIM


def counting_reads(sim) -> list[str]:  # type: ignore[no-untyped-def]
    """The names of the records ``sim``'s listing reads (a ``stat`` each, and a parse if it changed)."""
    seen: list[str] = []
    read = sim._instances.read

    def counted(inst):  # type: ignore[no-untyped-def]
        seen.append(inst.id)
        return read(inst)

    sim._instances.read = counted
    return seen


def launch(sim, n: int, **kw):  # type: ignore[no-untyped-def]
    offer = sim.offers()[0]
    return [sim.launch(LaunchRequest(job_id=i + 1, attempt=1, offer=offer, spot=False, owner="me", **kw))
            for i in range(n)]


def test_an_unchanged_instance_is_not_read_again_by_the_next_listing(make_sim):
    sim = make_sim(**SIM)
    launched = launch(sim, 5)
    first = sim.list_managed()
    assert sorted(i.id for i in first) == sorted(i.id for i in launched)
    reads = counting_reads(sim)
    again = sim.list_managed()
    assert reads == []  # was: one read (a stat) of every record, every listing
    assert [i.id for i in again] == [i.id for i in first] and all(a is b for a, b in zip(again, first, strict=True))


def test_a_record_written_by_any_writer_is_read_again_and_only_it(make_sim):
    sim = make_sim(**SIM)
    launched = launch(sim, 4)
    sim.list_managed()
    reads = counting_reads(sim)
    sim.terminate(launched[1].id)
    InstanceDir(sim.instances_dir / launched[2].id).end(InstanceState.TERMINATED, "by hand")  # as a runner's own dir
    listed = {i.id: i.state for i in sim.list_managed()}
    assert sorted(reads) == sorted([launched[1].id, launched[2].id])
    assert listed[launched[1].id] == listed[launched[2].id] == InstanceState.TERMINATED
    assert listed[launched[0].id] == listed[launched[3].id] == InstanceState.RUNNING


def test_a_new_instance_is_listed_at_the_next_listing(make_sim):
    sim = make_sim(**SIM)
    launch(sim, 2)
    sim.list_managed()
    new = sim.launch(LaunchRequest(job_id=9, attempt=1, offer=sim.offers()[0], spot=False, owner="me"))
    reads = counting_reads(sim)
    assert new.id in {i.id for i in sim.list_managed()}
    assert reads == [new.id]


def test_a_boot_is_seen_without_a_write_and_every_record_is_read_after_the_full_listing_period(make_sim, monkeypatch):
    sim = make_sim(**{**SIM, "boot_s": 3600})
    launched = launch(sim, 3)
    assert {i.state for i in sim.list_managed()} == {InstanceState.PENDING}
    reads = counting_reads(sim)
    assert {i.state for i in sim.list_managed()} == {InstanceState.PENDING} and reads == []
    later = time.time() + 2 * 3600  # past every ready_at: each record is due, unwritten
    monkeypatch.setattr(sim_provider, "time", SimpleNamespace(time=lambda: later))
    sim._scan._full_at = later  # (not the full listing: only the due records)
    assert {i.state for i in sim.list_managed()} == {InstanceState.RUNNING}
    assert sorted(reads) == sorted(i.id for i in launched)
    reads.clear()
    assert len(sim.list_managed()) == 3 and reads == []
    later += sim_provider.FULL_LIST_S
    assert len(sim.list_managed()) == 3 and sorted(reads) == sorted(i.id for i in launched)


def test_the_change_log_started_over_is_read_from_its_start(make_sim, monkeypatch):
    import gpuorch_sim.cloud as cloud

    sim = make_sim(**SIM)
    launched = launch(sim, 3)
    sim.list_managed()
    monkeypatch.setattr(cloud, "LOG_ROTATE_BYTES", 1)
    sim._scan._full_at = None
    sim.list_managed()  # a full listing starts the long log over
    assert (sim.instances_dir / ".changes").stat().st_size == 0
    reads = counting_reads(sim)
    sim.terminate(launched[0].id)
    assert {i.id: i.state for i in sim.list_managed()}[launched[0].id] == InstanceState.TERMINATED
    assert reads == [launched[0].id]


def test_the_cloud_process_ends_an_instance_launched_after_it_started(make_sim, tmp_path):
    """The cloud process reads what the change log names: an instance launched while it runs
    is settled on time (its lifetime) with no daemon listing it."""
    from sim_data import write_trace

    import gpuorch_sim.cloud as cloud
    from gpuorch.testing import wait_until

    f = write_trace(tmp_path / "z.json", [1])
    sim = make_sim(traces=[f"zz-1a={f}"], time_scale=10, boot_s=0)
    offer = sim.offers()[0]
    sim.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False, owner="me"))
    wait_until(lambda: cloud.cloud_running(sim.home), what="the cloud process")
    late = sim.launch(LaunchRequest(job_id=2, attempt=1, offer=offer, spot=False, owner="me", max_lifetime_s=1.0))
    gone = wait_until(lambda: not (m := sim._instances.read(sim._dir(late.id)).meta).state.alive and m,
                      timeout_s=10, what="the lifetime limit")
    assert (gone.state, gone.state_reason) == (InstanceState.TERMINATED, "max-lifetime")

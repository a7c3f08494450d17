"""The sim's volumes: the volume contract suite, records that outlive the provider object, an ended
instance letting go of its volume, and, through the assembled daemon, a job that sees its volume's
directory as GPUORCH_VOLUME_DIR, keeps its files across a reclaim within the zone, is billed its
storage, and leaves no volume behind."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from sim_data import write_trace

from gpuorch.money.storage import periods
from gpuorch.provider.port import LaunchRequest, managed_tags
from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing import VolumeContract
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_sim.provider import SimProvider


def _options(tmp_path: Path) -> dict:
    """Two zones of region aa-1 and one of bb-1, spot for the whole test."""
    f = write_trace(tmp_path / "up.json", [1], gap_s=3600)
    return {"traces": [f"aa-1a={f}", f"aa-1b={f}", f"bb-1a={f}"], "time_scale": 1, "boot_s": 0.1,
            "spot_price": 1.0, "on_demand_price": 3.0}


class TestSimVolumeContract(VolumeContract):
    missing_volume_id = "simvol-0000000000000000"

    @pytest.fixture
    def provider(self, make_sim, tmp_path) -> SimProvider:
        return make_sim(**_options(tmp_path))


def _instance(sim: SimProvider, zone: str, job: int) -> str:
    offer = next(o for o in sim.offers() if o.zone == zone)
    return sim.launch(LaunchRequest(job_id=job, attempt=1, offer=offer, spot=False, owner="c0ffee")).id


def test_a_new_provider_on_the_same_home_sees_the_same_volumes_and_files(make_sim, tmp_path):
    sim = make_sim(**_options(tmp_path))
    vol = sim.create_volume(region="aa-1", zone="aa-1a", size_gib=1, tags=managed_tags(3, 1, "c0ffee"))
    inst = _instance(sim, "aa-1a", 3)
    sim.attach_volume(vol.id, inst)
    (sim.sim_volumes.data_dir(vol.id) / "kept").write_text("yes")
    again = make_sim(**_options(tmp_path))  # a daemon restarted: a new provider object, the same home
    assert [(v.id, v.zone, v.attached_to) for v in again.list_volumes()] == [(vol.id, "aa-1a", inst)]
    assert (again.sim_volumes.data_dir(vol.id) / "kept").read_text() == "yes"
    again_vol = again.create_volume(region="aa-1", zone="aa-1a", size_gib=1, tags=managed_tags(3, 2, "c0ffee"))
    assert again_vol.id == vol.id  # idempotent by job and owner, whichever attempt asks
    assert again.create_volume(region="aa-1", zone="aa-1a", size_gib=1,
                               tags=managed_tags(3, 1, "another")).id != vol.id


def test_an_ended_instance_lets_go_of_its_volume(make_sim, tmp_path):
    sim = make_sim(**_options(tmp_path))
    vol = sim.create_volume(region="aa-1", zone="aa-1a", size_gib=1, tags=managed_tags(4, 1, "c0ffee"))
    first, second = _instance(sim, "aa-1a", 4), _instance(sim, "aa-1a", 5)
    sim.attach_volume(vol.id, first)
    sim.terminate(first)  # never detached: the cloud frees it with the instance
    assert [v.attached_to for v in sim.list_volumes()] == [None]
    sim.attach_volume(vol.id, second)
    sim.terminate(second)
    sim.delete_volume(vol.id)
    assert sim.list_volumes() == [] and not any(p.name.startswith("simvol-") for p in sim.sim_volumes.root.iterdir())


def test_a_bad_disk_type_or_volume_id_is_refused_by_name(make_sim, tmp_path):
    from gpuorch.errors import NotFoundError, PermanentError

    sim = make_sim(**_options(tmp_path))
    with pytest.raises(PermanentError) as e:
        sim.create_volume(region="aa-1", zone="aa-1a", size_gib=1, tags=managed_tags(6, 1, "c0ffee"), disk_type="gp3")
    assert e.value.code == "InvalidVolume.DiskType" and "volume.type" in str(e.value)
    with pytest.raises(NotFoundError):
        sim.attach_volume("../../etc", _instance(sim, "aa-1a", 6))
    sim.delete_volume("../../etc")  # quiet, and nothing outside the volumes is touched
    assert sim.list_volumes() == []


# Marks its attempt in the volume; on SIGUSR1 (a notice) it waits for the reclaim; at the gate,
# its result names the directory it was given and the marks it found there.
VOLUME_JOB = """trap '' USR1
echo "$GPUORCH_ATTEMPT" >> "$GPUORCH_VOLUME_DIR/marks"
while [ ! -e {gate} ]; do sleep 0.05; done
printf '{{"dir": "%s", "marks": "%s"}}' "$GPUORCH_VOLUME_DIR" "$(tr '\\n' ' ' < "$GPUORCH_VOLUME_DIR/marks")" \
  > "$GPUORCH_RESULT_FILE"
"""


def test_a_job_keeps_its_volume_files_across_a_reclaim_and_its_volume_goes_with_it(tmp_path):
    gate = tmp_path / "gate"
    config = {"providers": {"sim": {**_options(tmp_path), "min_notice_wall_s": 0.2, "cloud_idle_exit_s": 60}},
              "poll_s": 0.2, "max_sleep_s": 0.2, "lease_s": 1.0, "backoff_s": 1}
    d = AssembledDaemon.start(tmp_path / "daemon", config)
    sim = d.adapter("sim")
    try:
        job = d.submit({"name": "vol", "run": VOLUME_JOB.format(gate=shlex.quote(str(gate))), "providers": ["sim"],
                        "resources": {"gpu": "V100"}, "spot_policy": "spot",
                        "volume": {"size": "1GB", "mount": "/data"}})

        def running(n: int):  # attempt n's job has marked the volume
            a = next((a for a in d.attempts(job) if a.number == n and a.status == AttemptStatus.RUNNING), None)
            marks = sim.sim_volumes.data_dir(d.job(job).volume_id or "simvol-0000000000000000") / "marks"
            return a if a is not None and marks.exists() and str(n) in marks.read_text().split() else None

        first = d.until(lambda: running(1), what="attempt 1 to run with its volume")
        vol = d.job(job).volume_id
        sim.inject_preemption(first.instance_id, 0.5)
        second = d.until(lambda: next((a for a in d.attempts(job) if a.number > 1 and running(a.number)), None),
                         what="a later attempt to run with the volume")
        assert second.zone == first.zone and d.job(job).volume_id == vol  # the volume keeps the job to its zone
        run = sim.instances_dir / second.instance_id / "run"
        assert (run / "volume").resolve() == sim.sim_volumes.data_dir(vol).resolve()
        gate.touch()
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        raw = d.job(job).result
        assert raw is not None, d.job(job).message
        result = json.loads(raw)
        assert Path(result["dir"]).resolve() == sim.sim_volumes.data_dir(vol).resolve()
        assert result["marks"].split() == ["1", str(second.number)]  # attempt 1's mark was still there
        assert d.attempts(job)[0].reason == TerminationReason.PREEMPTED
        d.until(lambda: not sim.list_volumes(), what="the ended job's volume to be deleted")
        assert not sim.sim_volumes.data_dir(vol).exists()
        with d.store.read() as s:  # billed as storage while it existed, at the sim catalog's rate
            [period] = periods(s, [job])
        assert (period.provider, period.rate, period.end is not None) == ("sim", 0.08, True)
    finally:
        for inst in sim.list_managed():
            if inst.state.alive:
                sim.terminate(inst.id)
        sim.stop_cloud()
        d.close()

"""Volumes kept after their job (spec ``volume.keep``) and ``gpuorch volume delete``, through the
assembled daemon on the sim provider (its volumes are directories under the sim's home).

A kept volume outlives its job with its files, stays listed as kept, and its storage keeps billing;
``gpuorch volume delete`` records a request, the daemon's sweep waits while the volume is attached
elsewhere (VolumeInUse is a not-yet), then deletes it and billing stops. Bad input is refused in
one line, exit 2, nothing stored.

The volume sweep lists the provider's volumes at most once a minute in the daemon; here it runs
every pass (``sweep_every_s = 0``) so that the test waits on passes, not on the clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select
from typer.testing import CliRunner

from gpuorch.cli.app import app
from gpuorch.money.storage import periods
from gpuorch.provider.port import LaunchRequest
from gpuorch.store.models import Event, JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AssembledDaemon]:
    trace = tmp_path / "up.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 3600}, "data": [1]}))
    config = {"providers": {"sim": {"traces": [f"aa-1a={trace}"], "time_scale": 1, "boot_s": 0.1,
                                    "spot_price": 1.0, "on_demand_price": 3.0, "cloud_idle_exit_s": 60}},
              "poll_s": 0.2, "max_sleep_s": 0.2, "lease_s": 1.0, "backoff_s": 1}
    d = AssembledDaemon.start(tmp_path / "daemon", config)
    d.rec.volumes.sweep_every_s = 0  # see the module docstring
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "daemon"))  # the CLI's store is the daemon's
    sim = d.adapter("sim")
    try:
        yield d
    finally:
        for inst in sim.list_managed():
            if inst.state.alive:
                sim.terminate(inst.id)
        sim.stop_cloud()
        d.close()


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def listed(*extra: str) -> dict[int, dict[str, Any]]:
    code, out = cli("volume", "list", "--json", *extra)
    assert code == 0, out
    return {r["job"]: r for r in json.loads(out)["volumes"]}


def run_job(d: AssembledDaemon, name: str, keep: bool) -> int:
    job = d.submit({"name": name, "run": 'echo kept > "$GPUORCH_VOLUME_DIR/f"', "providers": ["sim"],
                    "resources": {"gpu": "V100"}, "spot_policy": "on-demand",
                    "volume": {"size": "500GB", "mount": "/data", "keep": keep}})
    assert d.until_terminal(job).status == JobStatus.SUCCEEDED, d.job(job).message
    return job


def kinds(d: AssembledDaemon, job: int) -> list[str]:
    with d.store.read() as s:
        return list(s.exec(select(Event.kind).where(Event.job_id == job).order_by(col(Event.id))))


def test_a_kept_volume_outlives_its_job_bills_and_goes_on_volume_delete(daemon: AssembledDaemon) -> None:
    d, sim = daemon, daemon.adapter("sim")
    job = run_job(d, "keeper", keep=True)
    vol = d.job(job).volume_id
    assert vol is not None
    for _ in range(3):  # sweeps after the end: the volume stays
        d.run_pass()
    assert [v.id for v in sim.list_volumes()] == [vol] and "volume_kept" in kinds(d, job)
    assert (sim.sim_volumes.data_dir(vol) / "f").read_text() == "kept\n"
    row = d.until(lambda: (r := listed()[job])["storage_cost"] > 0 and r, what="the kept volume to bill")
    assert (row["keep"], row["delete_requested"], row["deleted_at"], row["volume_id"]) == (True, False, None, vol)
    assert "kept" in cli("volume", "list")[1]

    # Attached elsewhere (as after a crash before the detach): the sweep waits, then deletes it.
    offer = next(o for o in sim.offers() if o.zone == d.job(job).volume_zone)
    holder = sim.launch(LaunchRequest(job_id=job, attempt=9, offer=offer, spot=False, owner="other")).id
    sim.attach_volume(vol, holder)
    code, out = cli("volume", "delete", vol, "--yes")
    assert code == 0 and "delete requested" in out, out
    assert listed()[job]["delete_requested"] is True
    for _ in range(3):
        d.run_pass()
    assert [v.id for v in sim.list_volumes()] == [vol]  # VolumeInUse: not yet
    sim.terminate(holder)
    d.until(lambda: not sim.list_volumes(), what="the requested volume to be deleted")
    assert not sim.sim_volumes.data_dir(vol).exists()
    with d.store.read() as s:
        [period] = periods(s, [job])
    assert period.end is not None and kinds(d, job).count("volume_deleted") == 1  # billing stopped there
    assert job not in listed() and listed("--deleted")[job]["deleted_at"] is not None

    code, out = cli("volume", "delete", str(job), "--yes")
    assert code == 2 and "already deleted" in out and len(out.strip().splitlines()) == 1, out


def test_a_volume_not_kept_goes_with_its_job(daemon: AssembledDaemon) -> None:
    d, sim = daemon, daemon.adapter("sim")
    job = run_job(d, "plain", keep=False)
    d.until(lambda: not sim.list_volumes(), what="the ended job's volume to be deleted")
    assert "volume_kept" not in kinds(d, job) and listed("--deleted")[job]["keep"] is False


def test_volume_delete_refuses_bad_input_in_one_line_and_stores_nothing(
        daemon: AssembledDaemon, tmp_path: Path) -> None:
    d = daemon
    gate = tmp_path / "gate"
    running = d.submit({"name": "busy", "run": f"while [ ! -e {gate} ]; do sleep 0.05; done", "providers": ["sim"],
                        "resources": {"gpu": "V100"}, "spot_policy": "on-demand",
                        "volume": {"size": "1GB", "mount": "/data", "keep": True}})
    d.until(lambda: d.job(running).volume_id, what="the running job's volume")
    plain = d.submit({"name": "novol", "run": "true", "providers": ["sim"], "resources": {"gpu": "V100"}})
    cases = [
        (["nosuch", "--yes"], "no volume or job 'nosuch'"),
        (["simvol-0000000000000000", "--yes"], "no volume or job"),
        ([str(running), "--yes"], f"cancel it first (gpuorch cancel {running})"),
        ([d.job(running).volume_id or "", "--yes"], "is still"),
        ([str(plain), "--yes"], "has no volume"),
        ([str(running)], "add --yes"),  # no terminal to ask on
    ]
    for args, says in cases:
        code, out = cli("volume", "delete", *args)
        assert code == 2 and says in out and len(out.strip().splitlines()) == 1, (args, out)
    assert "volume_delete_requested" not in kinds(d, running) + kinds(d, plain)
    gate.touch()
    d.until_terminal(running)


def test_a_requested_volume_gone_from_its_provider_is_recorded_deleted(daemon: AssembledDaemon) -> None:
    """Deleted out of band (or by the daemon, then a crash before its event): the next sweep that
    lists the provider records ``volume_deleted``, so the storage stops billing."""
    d, sim = daemon, daemon.adapter("sim")
    job = run_job(d, "gone", keep=True)
    vol = d.job(job).volume_id or ""
    code, out = cli("volume", "delete", "gone", "--yes", "--json")
    assert code == 0 and json.loads(out)["already_requested"] is False, out
    assert json.loads(cli("volume", "delete", vol, "--yes", "--json")[1])["already_requested"] is True
    sim.delete_volume(vol)
    d.until(lambda: "volume_deleted" in kinds(d, job), what="the gone volume's volume_deleted")
    assert kinds(d, job).count("volume_delete_requested") == 1
    with d.store.read() as s:
        assert periods(s, [job])[0].end is not None


def test_volume_keep_must_be_a_boolean() -> None:
    from gpuorch.errors import UserInputError
    from gpuorch.jobs.spec import parse_spec

    spec = {"name": "k", "run": "true", "volume": {"size": "1GB", "mount": "/data"}}
    volume = parse_spec(spec, "spec").volume
    assert volume is not None and volume.keep is False
    with pytest.raises(UserInputError, match=r"volume\.keep"):
        parse_spec({**spec, "volume": {"size": "1GB", "mount": "/data", "keep": "maybe"}}, "spec")

"""A dev box's volume across its idle stop (issue 35 item 3), with a real volume: the sim
provider's (a directory per volume under the sim's home, attached to one instance at a time:
providers/gpuorch_sim/volumes.py) through the assembled daemon, the box's real keepalive reporting
every second with a fake GPU utilisation feed and the daemon's clock moved forward.

The box writes a file into its volume through ``gpuorch ssh``; idle past ``idle_stop`` it is held:
its instance ends, its volume is kept (listed, detached, the file in it); ``gpuorch dev NAME`` starts
the same job again, whose new instance gets that volume, and the file is there.

A sim instance is a set of processes of this host: nothing is mounted at ``volume.mount``; the
job sees the volume's directory as ``GPUORCH_VOLUME_DIR``, and its run directory links to it as
``volume`` (``gpuorch_sim.runner``), which is where the box's shell (in ``<run>/work``) finds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.devbox.boxes import BoxRequest
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from tests.devbox.test_lifetime_daemon import Shift, fresh

pytestmark = pytest.mark.timeout(300)
runner = CliRunner()


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AssembledDaemon]:
    trace = tmp_path / "up.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": 3600}, "data": [1]}))
    config = {"providers": {"sim": {"traces": [f"aa-1a={trace}"], "time_scale": 1, "boot_s": 0.1,
                                    "spot_price": 1.0, "on_demand_price": 3.0, "cloud_idle_exit_s": 60}},
              "poll_s": 0.2, "max_sleep_s": 0.2}
    d = AssembledDaemon.start(tmp_path / "daemon", config)
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


def attached(d: AssembledDaemon) -> list[str | None]:
    """Where the sim's volumes are attached (None: to nothing alive)."""
    return [v.attached_to for v in d.adapter("sim").list_volumes()]


def cli(d: AssembledDaemon, *args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["--config", str(d.config.home / "daemon-config.yaml"), *args])
    return r.exit_code, r.output


def ssh(d: AssembledDaemon, *command: str) -> tuple[int, str]:
    """``gpuorch ssh nb -- COMMAND`` in a process of its own: a sim box's session is a shell of this
    host whose output is the CLI's own stdout (a real file, not the CLI runner's buffer)."""
    r = subprocess.run([sys.executable, "-m", "gpuorch", "--config", str(d.config.home / "daemon-config.yaml"),
                        "ssh", "nb", "--", *command], capture_output=True, timeout=120)
    return r.returncode, r.stdout.decode() + r.stderr.decode()


def test_idle_stop_keeps_the_box_s_volume_and_dev_starts_it_again_with_its_files(daemon, tmp_path, monkeypatch):
    d, sim = daemon, daemon.adapter("sim")
    util = tmp_path / "gpu-util"
    util.write_text("0\n")
    clock = Shift(monkeypatch)
    spec = BoxRequest("nb", gpu="V100", volume="500GB", idle_stop="30m", providers=("sim",),
                      env={"DEVBOX_GPU_UTIL_FILE": str(util), "DEVBOX_TICK_S": "1"}).spec()
    job = d.submit(spec)
    d.until(lambda: d.status(job) == JobStatus.RUNNING and d.job(job).volume_id, what="the box with its volume")
    vol = d.job(job).volume_id
    assert vol is not None
    data = sim.sim_volumes.data_dir(vol)
    [a1] = d.attempts(job)
    d.until(lambda: attached(d) == [a1.instance_id], what="the volume attached to the box")

    code, out = ssh(d, "sh", "-c", 'echo "notes of the first box" > ../volume/notes.txt')
    assert code == 0, out
    assert (data / "notes.txt").read_text() == "notes of the first box\n"

    since = clock.now()
    d.until(lambda: fresh(d, job, since, ssh_sessions=0), what="a report after the session")
    clock.seconds += 31 * 60  # idle past idle_stop
    d.until(lambda: d.status(job) == JobStatus.HELD, what="the idle stop")
    assert d.job(job).message.startswith("idle stop: no SSH session and GPU below 5 % for 30m; volume kept")
    [a1] = d.attempts(job)
    assert a1.reason == TerminationReason.HELD
    d.until(lambda: not sim.get(a1.instance_id).state.alive, what="the box's instance to end")
    for _ in range(3):  # held: the volume stays, detached, with its files
        d.run_pass()
    assert [(v.id, v.attached_to) for v in sim.list_volumes()] == [(vol, None)] and d.job(job).volume_id == vol
    assert (data / "notes.txt").read_text() == "notes of the first box\n"

    code, out = cli(d, "dev", "nb", "--json")
    assert code == 0, out
    assert json.loads(out)["started"] == "again" and json.loads(out)["id"] == job
    d.until(lambda: d.status(job) == JobStatus.RUNNING and len(d.attempts(job)) == 2, what="the box again")
    a2 = d.attempts(job)[-1]
    assert a2.instance_id != a1.instance_id and d.job(job).volume_id == vol
    d.until(lambda: attached(d) == [a2.instance_id], what="the volume on the new box")
    code, out = ssh(d, "cat", "../volume/notes.txt")
    assert code == 0 and out == "notes of the first box\n", out
    assert [v.id for v in sim.list_volumes()] == [vol]  # the same volume, not a new one

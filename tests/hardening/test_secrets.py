"""Issue 16, item 4: a job never sees the daemon's credentials or API token; the state directory,
the database and the mirrored logs are private to their owner; doctor warns when they are not."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

from gpuorch.agent.protocol import AgentConfig, NoticeSource, read_status
from gpuorch.doctor.state import mode_findings
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.store import Store

REPO = Path(__file__).resolve().parents[2]
SECRETS = {"AWS_SECRET_ACCESS_KEY": "aws-secret-value", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
           "GOOGLE_APPLICATION_CREDENTIALS": "/secret/key.json", "AZURE_CLIENT_SECRET": "az-secret-value",
           "GPUORCH_API_TOKEN": "api-token-value-xxxxxxxx", "GPUORCH_DATABASE_URL": "postgresql://u:pw@h/db"}


def run_agent(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The real agent (as the local and sim providers start it: with the daemon's environment)
    running a job that dumps its environment."""
    rundir = tmp_path / "run"
    rundir.mkdir()
    dump = tmp_path / "env.json"
    code = f"import json, os; json.dump(dict(os.environ), open({str(dump)!r}, 'w'))"
    job = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    config = AgentConfig(notice=NoticeSource(), job_id=1, attempt=1, job_name="env", run=job,
                         env={"MINE": "kept"})
    (rundir / "agent.json").write_text(config.to_json())
    proc = subprocess.Popen([sys.executable, "-m", "gpuorch.agent", str(rundir)], cwd=str(REPO),
                            env={**os.environ, **env, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # the job is one python start: well under a minute
            status = read_status(rundir)
            if status is not None and status.state in ("exited", "failed"):
                break
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    return json.loads(dump.read_text())


def test_a_job_gets_no_credentials_and_no_token(tmp_path):
    seen = run_agent(tmp_path, {**SECRETS, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
    assert not set(SECRETS) & set(seen), sorted(set(SECRETS) & set(seen))
    assert not any(v in json.dumps(seen) for v in SECRETS.values())
    assert seen["MINE"] == "kept" and seen["GPUORCH_JOB_ID"] == "1"  # the job's env and the contract
    assert seen["PATH"] and seen["LANG"] == "C.UTF-8" and seen["LC_ALL"] == "C.UTF-8"  # the allow-list


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_state_directory_database_and_logs_are_private(tmp_path):
    old = os.umask(0o022)  # a login shell's usual umask: files would be 0644
    try:
        home = tmp_path / "state"
        store = Store(f"sqlite:///{home / 'state.db'}")
        store.close()

        class Once:
            def read_log(self, offset):
                return b"AWS_SECRET_ACCESS_KEY=...\n", offset + 1

        LogMirror(home).pull(1, 1, Once())  # type: ignore[arg-type]
    finally:
        os.umask(old)
    assert mode(home) == 0o700 and mode(home / "state.db") == 0o600
    log = LogMirror(home).path(1, 1)
    assert mode(log) == 0o600 and mode(log.parent) == 0o700
    assert [f.status for f in mode_findings(home, home / "state.db")] == ["ok"]


def test_doctor_warns_about_wide_modes(tmp_path):
    home = tmp_path / "state"
    Store(f"sqlite:///{home / 'state.db'}").close()
    os.chmod(home / "state.db", 0o644)
    [f] = mode_findings(home, home / "state.db")
    assert f.status == "warn" and "state.db is 0644" in f.message and "chmod" in (f.fix or "")

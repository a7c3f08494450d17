"""Issue 31: a job on the embedded default (the local provider) cannot read the daemon's secrets.

Through the daemon ``gpuorch daemon`` builds: a job tries to read the daemon's and its agent's
``/proc/<pid>/environ``, the state database and the API token file, and is refused each time;
the fake cloud key and API token in the daemon's environment never reach its log. A root daemon
runs local jobs as ``gpuorch-job`` by default (created if missing); ``gpuorch doctor`` warns where
a daemon cannot isolate them.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuorch.errors import UserInputError
from gpuorch.provider.localdir.isolation import DEFAULT_USER, blocked, can_switch_user
from gpuorch.store.models import JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)

SECRETS = {"AWS_SECRET_ACCESS_KEY": "fake-aws-secret-4f9c2e71", "GPUORCH_API_TOKEN": "fake-api-token-8d3b5a06"}


def agent_python() -> str | None:
    """An interpreter a fresh system user can run the (stdlib-only) agent with: the daemon's own
    where its directories are open to others, else the system's python3 (3.8+)."""
    own = None if blocked(Path(sys.executable), None) or blocked(Path(os.__file__).parent, None) else sys.executable
    for python in filter(None, [own, "/usr/bin/python3", "/usr/local/bin/python3"]):
        if Path(python).exists() and blocked(Path(python), None) is None:
            done = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 8)"], check=False)
            if done.returncode == 0:
                return python
    return None


@pytest.fixture
def jobs_dir():
    """A jobs directory outside pytest's (0700) temporary tree, which no other user can enter."""
    root = Path(tempfile.mkdtemp(prefix="gpuorch-isolation-"))
    os.chmod(root, 0o711)
    yield root / "jobs"
    shutil.rmtree(root, ignore_errors=True)


needs_root = pytest.mark.skipif(not can_switch_user(), reason="the test process is not root (nor holds "
                                "CAP_SETUID/CAP_SETGID), so no run_as user is available to isolate jobs with")


@needs_root
def test_a_local_job_cannot_read_the_daemons_secrets(tmp_path, jobs_dir, monkeypatch):
    python = agent_python()
    if python is None:
        pytest.skip("no Python 3.8+ on this host that an unprivileged user can execute")
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    token = home / "api-token"
    token.write_text(SECRETS["GPUORCH_API_TOKEN"] + "\n")
    token.chmod(0o600)
    options = {"jobs_dir": str(jobs_dir)} | ({} if python == sys.executable else {"python": python})
    config = {"providers": {"local": options}, "api": {"token_file": str(token)}}
    with AssembledDaemon.start(home, config) as d:
        assert stat.S_IMODE(home.stat().st_mode) == 0o700  # the daemon's home: its own alone
        db = home / "state.db"
        assert db.exists()
        targets = {"daemon environ": f"/proc/{os.getpid()}/environ", "agent environ": "/proc/$PPID/environ",
                   "state db": str(db), "token": str(token)}
        reads = "\n".join(f'if cat "{path}" >/dev/null; then echo "READ {what}"; else echo "DENIED {what}"; fi'
                          for what, path in targets.items())
        job = d.submit({"name": "snoop", "run": f"id -u\n{reads}\nenv\ncat /proc/$DAEMON_PID/environ; true",
                        "env": {"DAEMON_PID": str(os.getpid())}, "resources": {"gpu": "A100:80GB:1"}})
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED, d.attempts(job)
        (attempt,) = d.attempts(job)
        log = d.service.read_log(job, attempt.number).decode()
        meta = d.adapter("local")._instance(attempt.instance_id).read()
    assert meta.run_as is not None and meta.run_as.user == DEFAULT_USER and meta.run_as.uid != 0
    assert log.splitlines()[0] == str(meta.run_as.uid), log  # the job ran as that user
    for what in targets:
        assert f"DENIED {what}" in log and f"READ {what}" not in log, log
    assert log.count("Permission denied") >= len(targets), log
    for name, value in SECRETS.items():
        assert value not in log and f"{name}=" not in log, log


def test_an_unknown_run_as_user_is_one_line_naming_the_option(tmp_path):
    with pytest.raises(UserInputError) as e:
        AssembledDaemon.start(tmp_path / "home", {"providers": {"local": {"run_as": "no-such-user-31"}}})
    message = str(e.value)
    assert "\n" not in message and message.startswith("providers.local.run_as: no user 'no-such-user-31'")
    assert "useradd --system" in message


@pytest.mark.parametrize("run_as", ["", "a b", "$(id)", "x" * 65, "-rf"])
def test_a_malformed_run_as_is_refused(tmp_path, run_as):
    with pytest.raises(UserInputError, match=r"^providers\.local\.run_as: "):
        AssembledDaemon.start(tmp_path / "home", {"providers": {"local": {"run_as": run_as}}})


def test_doctor_warns_with_the_fix_where_local_jobs_cannot_be_isolated(tmp_path, monkeypatch):
    """Not root: the default cannot isolate. Root: naming the daemon's own user opts out. Either
    way ``gpuorch doctor`` (the real CLI) says so as a warning with its fix, and exits 0."""
    import json

    from typer.testing import CliRunner

    from gpuorch.cli import app

    monkeypatch.setenv("GPUORCH_METRICS__PORT", "0")
    local = {"run_as": "root"} if os.geteuid() == 0 else {}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"home": str(tmp_path / "home"), "providers": {"local": local}}))
    r = CliRunner().invoke(app, ["--config", str(cfg), "doctor", "--json"])
    [found] = [f for f in json.loads(r.output)["findings"] if f["check"] == "local isolation"]
    assert r.exit_code == 0 and found["status"] == "warn", found
    assert "unisolated" in found["message"] and "daemon's environment, state and token" in found["message"]
    assert "providers.local.run_as" in found["fix"]
    text = CliRunner().invoke(app, ["--config", str(cfg), "doctor"]).output
    assert "WARN  local isolation" in text, text


@needs_root
def test_the_root_default_isolates_or_says_why_not(tmp_path, monkeypatch):
    """A root daemon with no run_as isolates by default; where this host keeps the job user from
    the interpreter (e.g. Python under a 0700 /root), the warning names the directory and the fix."""
    from gpuorch.provider.localdir.isolation import lookup
    from gpuorch_local.isolation import DEFAULT_JOBS_DIR, Isolation

    home = tmp_path / "home" / "local"
    plan = Isolation.plan(None, None, None, home)
    if plan.user is not None:
        assert plan.user == DEFAULT_USER and plan.jobs_dir is not None and plan.jobs_dir.parent == DEFAULT_JOBS_DIR
        assert plan.finding("local isolation").status == "ok"
    else:
        stop = blocked(Path(sys.executable), lookup(DEFAULT_USER)) or blocked(Path(os.__file__).parent, None)
        assert plan.why_not and str(stop) in plan.why_not and f"chmod o+x {stop}" in (plan.fix or "")
        assert plan.finding("local isolation").status == "warn"
    python = agent_python()
    if python is not None and python != sys.executable:  # the interpreter option makes it isolate
        assert Isolation.plan(None, None, python, home).user == DEFAULT_USER


@needs_root
def test_an_isolated_job_checkpoints_and_its_dead_man_switch_powers_its_instance_off(tmp_path, jobs_dir):
    """The isolated job's parts the daemon hands over: its file:// checkpoint prefix (the agent
    uploads as the job user) and the dead-man switch's shutdown, which that user carries out
    without writing the daemon's record; the daemon, back, ends the instance and resumes."""
    import shlex

    from gpuorch.agent.protocol import read_status
    from gpuorch.provider.localdir.instances import InstanceDir
    from gpuorch.provider.port import InstanceState
    from gpuorch.store.models import TerminationReason
    from gpuorch.testing import wait_until

    python = agent_python()
    if python is None:
        pytest.skip("no Python 3.8+ on this host that an unprivileged user can execute")
    fake_job = jobs_dir.parent / "fake_job.py"
    shutil.copy(Path(__file__).parents[1] / "agent" / "fake_job.py", fake_job)
    fake_job.chmod(0o644)
    store = jobs_dir.parent / "ckpt"
    options = {"jobs_dir": str(jobs_dir)} | ({} if python == sys.executable else {"python": python})
    with AssembledDaemon.start(tmp_path / "home", {"heartbeat_timeout_s": 3.0, "providers": {"local": options}}) as d:
        job = d.submit({"name": "deadman", "run": f"{shlex.quote(python)} {shlex.quote(str(fake_job))}",
                        "env": {"STEPS": "600", "EVERY": "100", "STEP_S": "0.02"},
                        "resources": {"gpu": "T4"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{store}", "interval": "0.5s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None)
        [a1] = d.attempts(job)
        inst = InstanceDir(d.adapter("local").instances_dir / a1.instance_id)
        assert inst.read().run_as is not None and inst.run_dir.stat().st_uid == inst.read().run_as.uid
        # The daemon goes silent: the agent checkpoints, hands off and powers the instance off.
        wait_until(lambda: (inst.run_dir / "powered-off").exists(), timeout_s=60, what="the power-off")
        gone = inst.observe()  # the daemon's next look ends it, as of the power-off
        assert (gone.state, gone.state_reason) == (InstanceState.TERMINATED, "shutdown-by-agent")
        st = read_status(inst.run_dir)
        assert st.notice_reason == "heartbeat" and st.final_done and st.final_checkpoint == st.last_checkpoint
        d.until_terminal(job)
        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.LOST and a2.resumed_from == st.final_checkpoint
        assert a2.reason == TerminationReason.SUCCEEDED


@needs_root
def test_an_isolated_agent_reads_the_daemons_notice_and_stop_files(tmp_path, jobs_dir):
    """notice.json (a preemption) and stop.json (a clean stop) are written by the daemon; the
    agent, as the job user, must be able to read both."""
    from gpuorch.agent.protocol import read_status
    from gpuorch.provider.localdir.instances import InstanceDir
    from gpuorch.testing import wait_until

    python = agent_python()
    if python is None:
        pytest.skip("no Python 3.8+ on this host that an unprivileged user can execute")
    options = {"jobs_dir": str(jobs_dir)} | ({} if python == sys.executable else {"python": python})
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"local": options}}) as d:
        jobs = [d.submit({"name": f"sleeper{i}", "run": "sleep 600", "resources": {"gpu": "T4"}}) for i in (1, 2)]
        d.until(lambda: all(d.attempts(j) and d.attempts(j)[-1].instance_id for j in jobs))
        local = d.adapter("local")
        runs = [InstanceDir(local.instances_dir / d.attempts(j)[-1].instance_id) for j in jobs]
        d.until(lambda: all((s := read_status(r.run_dir)) and s.state == "running" for r in runs))
        local.inject_preemption(runs[0].id, 120)
        local.runner(local.get(runs[1].id)).request_stop(__import__("time").time() + 120)
        for inst, reason in zip(runs, ("preemption", "stop"), strict=True):
            wait_until(lambda i=inst, r=reason: (s := read_status(i.run_dir)) and s.notice_reason == r,
                       timeout_s=60, what=f"the agent to see the {reason}")


@needs_root
def test_instances_from_before_isolation_are_still_found_and_ended(tmp_path, jobs_dir):
    """A daemon upgraded while local instances run: those stay in the home, unisolated, and the
    isolating provider still lists, relaunches by token (no second instance) and terminates them."""
    from gpuorch.provider.port import InstanceState, LaunchRequest
    from gpuorch.testing import wait_until
    from gpuorch_local import LocalProvider

    python = agent_python()
    if python is None:
        pytest.skip("no Python 3.8+ on this host that an unprivileged user can execute")
    home = tmp_path / "home"
    old = LocalProvider(home / "local")  # built in code: no isolation, instances in the home
    offer = next(o for o in old.offers() if o.zone == "local-east-a" and o.gpu_count == 1)
    request = LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False)
    before = old.launch(request)
    options = {"jobs_dir": str(jobs_dir)} | ({} if python == sys.executable else {"python": python})
    new = LocalProvider.from_config(options, home)
    assert new.isolation.user == DEFAULT_USER and new.instances_dir == jobs_dir
    assert [i.id for i in new.list_managed()] == [before.id]
    assert new.launch(request).id == before.id and not list(jobs_dir.iterdir())
    new.terminate(before.id)
    wait_until(lambda: new.get(before.id).state == InstanceState.TERMINATED, what="the old instance to end")


@pytest.mark.parametrize("name", ["AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "AZURE_STORAGE_CONNECTION_STRING",
                                  "HF_TOKEN", "RUNPOD_API_KEY", "VAST_APIKEY", "MY_DB_PASSWORD", "GITHUB_PAT_SECRET",
                                  "SSH_AUTH_SOCK", "KUBECONFIG", "SENTRY_DSN", "ARM_CLIENT_SECRET",
                                  "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "PGPASSWORD", "npm_config__authToken"])
def test_the_agent_gets_no_secret_by_rule(name):
    from gpuorch.provider.localdir.isolation import agent_env

    assert name not in agent_env({name: "x", "PATH": "/usr/bin"}) and "PATH" in agent_env({"PATH": "/usr/bin"})


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "PYTHONPATH",
                                  "STORAGE_EMULATOR_HOST", "GPUORCH_S3_PART_SIZE_MB", "OMP_NUM_THREADS", "TMPDIR"])
def test_the_agent_keeps_what_is_not_secret(name):
    from gpuorch.provider.localdir.isolation import agent_env

    assert name in agent_env({name: "x"})


@needs_root
def test_an_isolated_gang_runs_every_node_as_the_job_user(tmp_path, jobs_dir):
    python = agent_python()
    if python is None:
        pytest.skip("no Python 3.8+ on this host that an unprivileged user can execute")
    options = {"jobs_dir": str(jobs_dir)} | ({} if python == sys.executable else {"python": python})
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"local": options}}) as d:
        job = d.submit({"name": "gang", "run": 'test -n "$NODE_RANK" && test "$(id -u)" != 0 && sleep 1', "nodes": 2,
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED, d.attempts(job)
        nodes = [p for p in jobs_dir.iterdir() if not p.name.startswith(".")]
        assert len(nodes) == 2 and all((p / "run").stat().st_uid != 0 for p in nodes)

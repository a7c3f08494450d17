"""The local provider and its runner with the real agent: processes, kills, notices, knobs.

Everything waits with ``wait_until`` (polling with a timeout), never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.clock import utcnow
from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, UserInputError
from gpuorch.provider.localdir.instances import InstanceDir
from gpuorch.provider.localdir.procs import kill_instance, marked_pids, process_alive
from gpuorch.provider.port import Instance, InstanceState, LaunchRequest, Offer
from gpuorch.registry import load_provider
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.testing import wait_until
from gpuorch_local import LocalProvider, LocalRunner
from gpuorch_local.market import canonical_gpu, default_offers, host_offers

T4 = "local.t4.1"


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    p = LocalProvider(tmp_path / "local")
    yield p
    for inst in p.list_managed():  # no test leaves a process behind
        p.terminate(inst.id)


def offer(p: LocalProvider, zone: str = "local-east-a", itype: str = T4) -> Offer:
    return next(o for o in p.offers() if o.zone == zone and o.instance_type == itype)


def launch(p: LocalProvider, job_id: int = 1, attempt: int = 1, spot: bool = True, **where: str) -> Instance:
    return p.launch(LaunchRequest(job_id=job_id, attempt=attempt, offer=offer(p, **where), spot=spot))


def start(p: LocalProvider, inst: Instance, run: str, workdir: Path | None = None) -> LocalRunner:
    runner = p.runner(inst)
    assert isinstance(runner, LocalRunner)
    runner.start(AgentConfig(job_id=inst.job_id or 0, attempt=inst.attempt or 0, job_name="t", run=run), workdir)
    return runner


def wait_status(runner: LocalRunner, ok: Callable[[AgentStatus], object], what: str) -> AgentStatus:
    def check() -> AgentStatus | None:
        st = runner.status()
        return st if st is not None and ok(st) else None

    return wait_until(check, timeout_s=10.0, what=what)


def running_job(runner: LocalRunner) -> int:
    st = wait_status(runner, lambda s: s.state == "running" and s.pid, "the job to run")
    assert st.pid is not None
    return st.pid


# -- jobs run by the real agent --------------------------------------------------------------
def test_job_runs_to_its_exit_code_with_its_workdir_and_log(provider: LocalProvider, tmp_path: Path) -> None:
    workdir = tmp_path / "src"
    workdir.mkdir()
    (workdir / "data.txt").write_text("from the workdir\n")
    runner = start(provider, launch(provider), "cat data.txt; echo done; exit 3", workdir)
    st = wait_status(runner, lambda s: s.state == "exited", "the job to exit")
    assert st.exit_code == 3
    data, end = runner.read_log()
    assert data == b"from the workdir\ndone\n" and end == len(data)
    assert runner.read_log(offset=5, limit=3) == (data[5:8], 8)
    assert runner.read_log(offset=end) == (b"", end)


def test_start_is_idempotent_and_sets_the_file_notice(provider: LocalProvider) -> None:
    inst = launch(provider)
    runner = start(provider, inst, "sleep 30")
    pid_file = InstanceDir(provider.instances_dir / inst.id).agent_pid_file
    first_pid = pid_file.read_text()
    start(provider, inst, "echo a second agent must not start")
    assert pid_file.read_text() == first_pid
    config = AgentConfig.from_json((runner.rundir / "agent.json").read_text())
    assert config.run == "sleep 30"
    assert (config.notice.kind, config.notice.path) == ("file", str(provider.instances_dir / inst.id / "notice.json"))


def test_runner_is_unavailable_while_booting_and_once_gone(tmp_path: Path) -> None:
    p = LocalProvider(tmp_path / "local", boot_s=60)
    inst = launch(p)
    assert inst.state == InstanceState.PENDING
    with pytest.raises(RunnerUnavailable):
        start(p, inst, "true")
    p.terminate(inst.id)
    with pytest.raises(RunnerUnavailable):
        start(p, inst, "true")
    assert p.get(inst.id).state == InstanceState.TERMINATED


def test_heartbeat_touches_the_heartbeat_file(provider: LocalProvider) -> None:
    runner = LocalRunner(provider.instances_dir / launch(provider).id)
    runner.heartbeat()
    assert (runner.rundir / "heartbeat").exists()


# -- terminate and preemption: hard kills ----------------------------------------------------
def test_terminate_kills_the_agent_and_the_jobs_process_group(provider: LocalProvider) -> None:
    inst = launch(provider)
    runner = start(provider, inst, "sleep 60 & sleep 60")  # a background child shares the group
    job_pid = running_job(runner)
    agent_pid = int(InstanceDir(provider.instances_dir / inst.id).agent_pid_file.read_text())
    provider.terminate(inst.id)
    assert provider.get(inst.id).state == InstanceState.TERMINATED
    wait_until(lambda: not process_alive(job_pid) and not process_alive(agent_pid), timeout_s=5, what="the kill")
    wait_until(lambda: not marked_pids(provider.instances_dir / inst.id), timeout_s=5, what="no survivors")
    provider.terminate(inst.id)  # quiet the second time


def test_preemption_notifies_the_agent_then_kills_at_the_deadline(provider: LocalProvider) -> None:
    inst = launch(provider)
    # The job ignores SIGUSR1 (the agent's checkpoint signal), so only the reclaim can end it.
    runner = start(provider, inst, "trap '' USR1; sleep 60")
    job_pid = running_job(runner)
    provider.inject_preemption(inst.id, notice_s=2.0)
    noticed = provider.get(inst.id)
    assert noticed.state == InstanceState.RUNNING and noticed.preemption_deadline is not None
    deadline = noticed.preemption_deadline.timestamp()
    st = wait_status(runner, lambda s: s.notice_at is not None, "the agent to see the notice")
    assert st.notice_at is not None and st.notice_at < deadline and st.notice_deadline == pytest.approx(deadline)
    def ended() -> Instance | None:
        now = provider.get(inst.id)
        return None if now.state == InstanceState.RUNNING else now

    gone = wait_until(ended, timeout_s=10, what="the preemption")
    assert (gone.state, gone.state_reason) == (InstanceState.PREEMPTED, "spot-interruption")
    assert utcnow().timestamp() >= deadline
    wait_until(lambda: not process_alive(job_pid), timeout_s=5, what="the job to die")
    provider.terminate(inst.id)
    assert provider.get(inst.id).state == InstanceState.PREEMPTED  # the first ending stays


def test_a_due_preemption_is_settled_on_observation_without_its_reaper(provider: LocalProvider) -> None:
    inst = launch(provider)
    past = utcnow() - timedelta(seconds=1)
    InstanceDir(provider.instances_dir / inst.id).update(lambda m: m.model_copy(update={"preemption_deadline": past}))
    [listed] = provider.list_managed()
    assert listed.state == InstanceState.PREEMPTED
    assert provider.get(inst.id).state_reason == "spot-interruption"


def test_a_recorded_pid_reused_by_another_process_is_not_killed(tmp_path: Path) -> None:
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        kill_instance(tmp_path / "instances" / "local-1-1", [stranger.pid])
        assert stranger.poll() is None and process_alive(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait()


# -- launch: idempotency, validation, capacity -----------------------------------------------
def test_launch_records_the_instance_on_disk(provider: LocalProvider) -> None:
    inst = launch(provider, job_id=7, attempt=2)
    assert inst.id == "local-7-2" and inst.host is None
    meta = json.loads((provider.instances_dir / inst.id / "meta.json").read_text())
    assert meta["client_token"] == "gpuorch-7-2" and meta["spot"] is True and meta["state"] == "pending"
    assert meta["tags"] == inst.tags and meta["offer"]["instance_type"] == T4
    assert not [p for p in provider.instances_dir.iterdir() if p.name.startswith(".")]  # no staging left


def test_concurrent_launches_of_one_token_create_one_instance(provider: LocalProvider) -> None:
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: launch(provider, job_id=5).id, range(16)))
    assert ids == {"local-5-1"}
    assert [p.name for p in provider.instances_dir.iterdir()] == ["local-5-1"]


def test_launch_rejects_offers_it_does_not_sell(provider: LocalProvider) -> None:
    t4 = offer(provider)
    for bad, spot in [(t4.model_copy(update={"provider": "aws"}), False),
                      (t4.model_copy(update={"instance_type": "local.t4.3"}), False),
                      (t4.model_copy(update={"spot_price_per_hour": None}), True)]:
        with pytest.raises(PermanentError):
            provider.launch(LaunchRequest(job_id=1, attempt=1, offer=bad, spot=spot))
    assert provider.list_managed() == []


def test_capacity_knob_runs_one_market_out(provider: LocalProvider) -> None:
    provider.set_capacity("local-east-a", T4, spot=True, available=False)
    with pytest.raises(NoCapacityError):
        launch(provider, job_id=1)
    assert launch(provider, job_id=2, spot=False).state.alive  # on-demand still has room
    assert launch(provider, job_id=3, zone="local-east-b").state.alive  # so has the next zone
    provider.set_capacity("local-east-a", T4, spot=True, available=True)
    assert launch(provider, job_id=1).state.alive


def test_capacity_file_wildcards_and_existing_instances(provider: LocalProvider) -> None:
    kept = launch(provider, zone="local-west-a")
    (provider.home / "capacity.json").write_text(json.dumps({"unavailable": ["local-west-a/*/*"]}))
    with pytest.raises(NoCapacityError):
        launch(provider, job_id=2, zone="local-west-a", itype="local.h100.8", spot=False)
    assert launch(provider, zone="local-west-a").id == kept.id  # an existing instance is returned


def test_unknown_and_malformed_ids_are_not_found(provider: LocalProvider) -> None:
    for bad in ("local-9-9", "../../etc", "x"):
        with pytest.raises(NotFoundError):
            provider.get(bad)
        provider.terminate(bad)


def test_registered_as_the_local_entry_point(tmp_path: Path) -> None:
    p = load_provider("local", {"boot_s": 1.5}, tmp_path)
    assert isinstance(p, LocalProvider) and p.home == (tmp_path / "local").resolve() and p.boot_s == 1.5
    with pytest.raises(UserInputError, match="providers.local.bootsecs"):
        load_provider("local", {"bootsecs": 1}, tmp_path)


# -- the market ------------------------------------------------------------------------------
def test_default_market_spans_regions_zones_and_gpus() -> None:
    offers = default_offers()
    assert {(o.region, o.zone) for o in offers} == {
        ("local-east", "local-east-a"), ("local-east", "local-east-b"), ("local-west", "local-west-a")}
    assert {o.gpu for o in offers} == {"T4", "A10G", "L4", "A100", "A100-80GB", "H100"}
    for o in offers:
        assert o.instance_type == f"local.{o.gpu.lower()}.{o.gpu_count}"  # type: ignore[union-attr]
        assert o.spot_price_per_hour is not None and 0.299 <= o.spot_price_per_hour / o.price_per_hour <= 0.401
        assert (o.billing_granularity_s, o.min_billing_s) == (1, 60) and o.vcpus and o.memory_gib
    a100 = {o.zone: o.spot_price_per_hour for o in offers if o.instance_type == "local.a100-80gb.1"}
    assert len(set(a100.values())) == len(a100) > 1  # spot differs by zone


def test_offers_given_to_the_constructor_replace_the_market(tmp_path: Path) -> None:
    mine = [offer(LocalProvider(tmp_path / "a"))]
    assert LocalProvider(tmp_path / "b", offers=mine).offers() == mine


@pytest.mark.parametrize(("reported", "gib", "name"), [
    ("NVIDIA A100-SXM4-80GB", 80, "A100-80GB"), ("NVIDIA A100-SXM4-40GB", 40, "A100"), ("Tesla T4", 15, "T4"),
    ("NVIDIA H100 80GB HBM3", 79.6, "H100"), ("NVIDIA H100 PCIe", 79.6, "H100-PCIE"), ("NVIDIA H200", 140.4, "H200"),
    ("NVIDIA GeForce RTX 4090", 24, "RTX4090"), ("Quadro RTX 8000", 48, None),  # not in the GPU table
])
def test_nvidia_smi_names_map_to_canonical_gpus(reported: str, gib: float, name: str | None) -> None:
    assert canonical_gpu(reported, gib) == name


def test_host_gpus_become_one_on_demand_offer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf 'NVIDIA A100-SXM4-80GB, 81920\\nNVIDIA A100-SXM4-80GB, 81920\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    [host] = host_offers()
    assert (host.zone, host.gpu, host.gpu_count, host.spot_price_per_hour) == ("local-host", "A100-80GB", 2, None)
    assert host.instance_type == "local.host.a100-80gb.2" and host.price_per_hour > 0
    assert host in LocalProvider(tmp_path / "local").offers()


def test_records_of_one_offer_share_one_offer_object_and_read_back_equal(provider: LocalProvider) -> None:
    t4 = [o for o in provider.offers() if o.instance_type == T4]
    a, b, c = (provider.launch(LaunchRequest(job_id=j, attempt=1, offer=o, spot=False))
               for j, o in ((1, t4[0]), (2, t4[0]), (3, t4[1])))
    ra, rb, rc = (InstanceDir(provider.instances_dir / i.id).read() for i in (a, b, c))
    assert ra.offer is rb.offer and ra.offer == t4[0]  # one object for the daemon to keep, not one a record
    assert rc.offer is not ra.offer and rc.offer == t4[1]
    assert ra.tags == a.tags and ra.id == a.id and ra.state == InstanceState.PENDING


def test_a_malformed_record_is_a_value_error(tmp_path: Path) -> None:
    inst = InstanceDir(tmp_path / "i-1")
    inst.path.mkdir()
    for text in ("[]", '{"offer": {"zone": ["x"]}}', '{"id": "i-1"}', "not json"):
        inst.meta_file.write_text(text)
        with pytest.raises(ValueError):
            inst.read()

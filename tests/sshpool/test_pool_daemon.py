"""SSH node pools through the assembled daemon (``gpuorch daemon``'s own build: the store-backed
slot ledger, the metrics wrapper), against real sshd "hosts" on 127.0.0.1: a job runs on a host
seeing only its leased GPUs; two daemons on one store never run more on a host than it has; a
host that dies mid-job makes its job lost, and it runs again on another host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost, host_processes, kill_host

from gpuorch.store.models import JobStatus, SlotLease, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import passes_until

pytestmark = [pytest.mark.sshpool, pytest.mark.timeout(300)]


def gated_job(out: Path, gate: Path, name: str = "pool-job") -> dict[str, Any]:
    """A 1-GPU job that writes the GPUs it sees, then waits for ``gate`` to exist."""
    return {"name": name, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
            "run": f'echo "$CUDA_VISIBLE_DEVICES" > {out}/"$GPUORCH_JOB_ID-$GPUORCH_ATTEMPT.gpus"; '
                   f"while [ ! -e {gate} ]; do sleep 0.1; done"}


def leases(d: AssembledDaemon) -> list[SlotLease]:
    from sqlmodel import select

    with d.store.read() as s:
        return list(s.exec(select(SlotLease)).all())


def held(d: AssembledDaemon) -> list[tuple[str, int]]:
    """(host, slot) of every unreleased lease row."""
    return [(r.host, r.slot) for r in leases(d) if r.released_at is None]


def test_a_job_runs_on_a_pool_host_with_only_its_gpus_and_frees_them(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"ssh": pool_options([host])}}) as d:
        ssh = d.provider("ssh")
        assert type(ssh).__name__ == "InstrumentedProvider" and ssh.capabilities.owned_capacity
        job = d.submit(gated_job(out, gate))
        d.until(lambda: (out / f"{job}-1.gpus").exists(), what="the job to start on the host")
        assert (out / f"{job}-1.gpus").read_text().strip() in ("0", "1")  # one of the host's two
        assert len(held(d)) == 1
        gate.touch()
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        (a,) = d.attempts(job)
        assert a.provider == "ssh" and a.zone == "host0" and a.price_per_hour == 0
        d.until(lambda: not held(d), what="the job's slot to be released")
        d.until(lambda: not host_processes(host.root), what="nothing of the job left on the host")


def test_two_daemons_on_one_store_never_run_more_on_a_host_than_it_has(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    """One host with 2 GPUs, three 1-GPU jobs, two daemons sharing a SQLite store: two run, on
    distinct GPUs; the third finds the host full (no capacity, nothing leased for it) however
    many passes either daemon makes; no slot is ever held twice. (It runs once a slot is free,
    after the daemon's no-offer retry: docs/ssh-pools.md.)"""
    (host,) = start_hosts(1)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    config = {"providers": {"ssh": pool_options([host])}, "database_url": f"sqlite:///{tmp_path / 'shared.db'}"}
    with AssembledDaemon.start(tmp_path / "a", config) as a, AssembledDaemon.start(tmp_path / "b", config) as b:
        assert a.rec.owner != b.rec.owner
        jobs = [a.submit(gated_job(out, gate, f"j{i}")) for i in range(3)]
        seen: list[list[tuple[str, int]]] = []

        def both_passes() -> None:
            a.run_pass()
            b.run_pass()
            seen.append(held(a))

        def started() -> list[Path]:
            return sorted(out.glob("*.gpus"))

        passes_until(both_passes, lambda: len(started()) >= 2, timeout_s=120, what="two jobs to start")
        passes_until(both_passes, lambda: any(r.reason == TerminationReason.NO_CAPACITY
                                              for j in jobs for r in a.attempts(j)),
                     timeout_s=60, what="the third job to find the host full")
        for _ in range(4):  # more passes of both daemons change nothing
            both_passes()
        assert len(started()) == 2, started()
        assert sorted(p.read_text().strip() for p in started()) == ["0", "1"]
        assert sorted(a.status(j) for j in jobs) == sorted([JobStatus.RUNNING] * 2 + [JobStatus.QUEUED])
        assert all(len(h) == len(set(h)) <= 2 for h in seen), "a slot held twice, or more than the host has"
        assert len({r.token for r in leases(a)}) == 2  # the full host leased nothing to the third
        gate.touch()
        passes_until(both_passes, lambda: [a.status(j) for j in jobs].count(JobStatus.SUCCEEDED) == 2,
                     timeout_s=120, what="the two running jobs to end")
        passes_until(both_passes, lambda: not held(a), timeout_s=60, what="their slots to be released")


def test_a_host_killed_mid_job_makes_it_lost_and_it_runs_again_on_another_host(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    hosts = start_hosts(2)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"ssh": pool_options(hosts, "A100:80GB:1")}}) as d:
        job = d.submit(gated_job(out, gate))
        d.until(lambda: (out / f"{job}-1.gpus").exists(), what="the job to start")
        (first,) = d.attempts(job)
        victim = hosts[int(first.zone.removeprefix("host"))]
        assert kill_host(victim) >= 2  # the host goes dark: its sshd and sessions, its agent and its job
        d.until(lambda: len(d.attempts(job)) >= 2 and (out / f"{job}-2.gpus").exists(),
                what="the job lost and running again elsewhere")
        lost, second = d.attempts(job)
        assert lost.reason == TerminationReason.LOST and "silent" in (lost.message or ""), lost.message
        assert second.zone != first.zone
        gate.touch()
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        # The dead host's slot stays held (nobody has seen it free of the job); the live one's is released.
        d.until(lambda: {h for h, _ in held(d)} == {f"127.0.0.1:{victim.sshd.port}"},
                what="only the dead host's slot held")

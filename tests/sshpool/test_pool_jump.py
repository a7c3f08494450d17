"""A pool host behind a jump host (``proxy_jump``): checked, offered and run through a
``direct-tcpip`` channel of a verified connection to the jump host, whose key comes from the
user's known_hosts; with the jump host gone the host behind it cannot be reached."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost, kill_host

from gpuorch.agent.protocol import AgentConfig
from gpuorch.provider import LaunchRequest
from gpuorch.store import Store
from gpuorch.store.slots import StoreSlotLedger
from gpuorch.testing.contract import wait_until
from gpuorch_ssh.provider import SshPoolProvider

pytestmark = pytest.mark.sshpool


def test_a_host_behind_a_jump_host(tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                                   pool_options: Callable[..., dict[str, Any]], store: Store):
    jump, behind = start_hosts(2)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{jump.sshd.port} {jump.host_public}\n")
    opts = pool_options([behind], known_hosts=str(known))
    opts["hosts"][0]["proxy_jump"] = f"{jump.sshd.user}@127.0.0.1:{jump.sshd.port}"
    provider = SshPoolProvider.from_config(opts, tmp_path / "home")
    provider.use_slot_ledger(StoreSlotLedger(store, "ssh"))
    try:
        offer = min(provider.offers(), key=lambda o: o.gpu_count)
        inst = provider.launch(LaunchRequest(job_id=3, attempt=1, offer=offer, spot=False, owner="c0ffee"))
        runner = provider.runner(inst)
        assert "via" in repr(runner.connection)
        runner.start(AgentConfig(job_id=3, attempt=1, job_name="jumped", run='test -n "$CUDA_VISIBLE_DEVICES"'))
        done = wait_until(lambda: (s := runner.status()) is not None and s.state == "exited" and s,
                          timeout_s=30, step_s=0.2, what="the job behind the jump host to end")
        assert done.exit_code == 0
        kill_host(jump)  # the way in is gone; the host behind it still runs its sshd
        wait_until(lambda: provider.watch.refresh(wait_s=10, force=True) or not provider.watch.state("host0").ok,
                   timeout_s=30, step_s=0.2, what="the host behind the jump host to fail its check")
        assert "unreachable" in (provider.watch.state("host0").error or "")
        assert behind.sshd.proc is not None and behind.sshd.proc.poll() is None
    finally:
        provider.close()

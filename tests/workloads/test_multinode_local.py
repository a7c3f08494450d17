"""A real 2-node x 1-process torchrun DDP job (gloo) on the local provider: each node a local
instance with its own agent and process group, rendezvous on 127.0.0.1 from
``rendezvous_env``, node 0 the only one that uploads. Node 1 gets a preemption notice: its
worker's flag reaches rank 0 through the all-reduce, both ranks save, rank 0's checkpoint is
uploaded, the gang is ended and relaunched as a gang from it, and the run ends with bitwise the
loss of an uninterrupted 2-rank run.

The daemon does not drive gangs yet (docs/workloads.md, "Multi-node: status"): this test plays
the daemon's part (end every node when one is noticed, relaunch all) with the pieces it will
use, ``node_requests``, ``launch_gang``, ``rendezvous_env`` and the agent's restore-only nodes.
"""

from __future__ import annotations

import socket
import sys

import pytest
import torch_runs

from gpuorch.agent.protocol import AgentConfig
from gpuorch.checkpoint import list_manifests, open_store
from gpuorch.provider.localdir import LocalRunner
from gpuorch.provider.port import LaunchRequest
from gpuorch.reconciler.gang import launch_gang, node_requests, rendezvous_env
from gpuorch.testing.contract import wait_until
from gpuorch_local.provider import LocalProvider

pytest.importorskip("torch", reason="the workloads extra (pip install -e '.[workloads]') is not installed")
pytestmark = [pytest.mark.multinode, pytest.mark.workloads]

EXAMPLE = torch_runs.EXAMPLES / "torch_ddp"
ENV = {"STEPS": "240", "CKPT_EVERY": "60", "SEED": "3", "OMP_NUM_THREADS": "1"}
TORCHRUN = ('"$PY" -m torch.distributed.run --nnodes "$NNODES" --node-rank "$NODE_RANK" '
            '--nproc-per-node "$NPROC_PER_NODE" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" train.py')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gang(local: LocalProvider, attempt: int, store_url: str, env: dict[str, str]) -> list[LocalRunner]:
    offer = local.offers()[0]
    base = LaunchRequest(job_id=1, attempt=attempt, offer=offer, spot=offer.spot_price_per_hour is not None)
    gang = launch_gang(local, node_requests(base, 2))
    port = free_port()
    runners = []
    for rank, inst in enumerate(gang):
        runner = local.runner(inst)
        assert isinstance(runner, LocalRunner)
        config = AgentConfig(job_id=1, attempt=attempt, job_name="ddp", run=TORCHRUN, checkpoint_url=store_url,
                             sync_interval_s=0.5, upload_checkpoints=rank == 0,
                             env={**env, "PY": sys.executable, **rendezvous_env(rank, 2, "127.0.0.1", 1, port)})
        runner.start(config, workdir=EXAMPLE)
        runners.append(runner)
    return runners


def test_two_node_torchrun_preempted_on_node_1_resumes_as_a_gang_with_the_uninterrupted_loss(tmp_path):
    reference = torch_runs.run(EXAMPLE / "train.py", tmp_path, ENV, "ref", nproc=2)
    local = LocalProvider(tmp_path / "local")
    store_url = f"file://{tmp_path / 'store'}/ddp-1"
    store, prefix = open_store(store_url)

    node0, node1 = start_gang(local, 1, store_url, {**ENV, "STEP_SLEEP": "0.03"})
    wait_until(lambda: list_manifests(store, prefix), timeout_s=240, what="node 0's first upload")
    local.inject_preemption(node1.instance.id, notice_s=20)
    # The daemon's gang rule: a notice on any node ends the gang's attempt once rank 0's final
    # checkpoint (taken on the notice, at a step no periodic save would pick) is uploaded.
    noticed = wait_until(lambda: [m for m in list_manifests(store, prefix) if m.step and m.step % 60],
                         timeout_s=60, what="rank 0's checkpoint taken on node 1's notice")[0]
    status1 = node1.status()
    assert status1 is not None and status1.notice_reason == "preemption" and status1.uploaded == []
    for runner in (node0, node1):
        local.terminate(runner.instance.id)
    assert [i for i in local.list_managed() if i.state.alive] == []

    node0, node1 = start_gang(local, 2, store_url, ENV)
    done = wait_until(lambda: (s := node0.status()) is not None and s.state in ("exited", "failed") and s,
                      timeout_s=240, what="the relaunched gang to finish")
    assert done.state == "exited" and done.exit_code == 0, node0.read_log()[0].decode()[-3000:]
    assert done.restored_from == noticed.name
    status1 = wait_until(lambda: (s := node1.status()) is not None and s.state == "exited" and s, timeout_s=60,
                         what="node 1's agent")
    assert status1.restored_from == noticed.name and status1.uploaded == []  # every node restores, one uploads
    log = node0.read_log()[0].decode()
    assert f"resuming from {noticed.name}" in log
    assert done.result is not None and done.result["final_loss"] == reference["final_loss"]  # bitwise

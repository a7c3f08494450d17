"""A real 2-node x 1-process torchrun DDP job (gloo) through the assembled daemon
(``gpuorch.testing.daemon``: the embedded default, metrics wrapper on) on the local provider:
``nodes: 2`` becomes a gang of two instances (each with its own agent and process group,
rendezvous on 127.0.0.1), node 1 is preempted with a notice, the whole gang's attempt ends after
rank 0's final checkpoint is uploaded, the job relaunches as a gang from it, and finishes with
bitwise the loss of an uninterrupted 2-rank run. The gang bills both nodes."""

from __future__ import annotations

import json
import sys

import pytest
import torch_runs
from sqlmodel import select

from gpuorch.provider.gang import node_token
from gpuorch.provider.localdir import InstanceDir, instance_id_for
from gpuorch.store.models import Checkpoint, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_local.provider import LocalProvider

torch_runs.require("torch")
pytestmark = [pytest.mark.multinode, pytest.mark.workloads, pytest.mark.timeout(900)]  # slow on a loaded machine

EXAMPLE = torch_runs.EXAMPLES / "torch_ddp"
ENV = {"STEPS": "240", "CKPT_EVERY": "60", "SEED": "3", "OMP_NUM_THREADS": "1"}
TORCHRUN = ('"$PY" -m torch.distributed.run --nnodes "$NNODES" --node-rank "$NODE_RANK" '
            '--nproc-per-node "$NPROC_PER_NODE" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" train.py')


def node_dir(local: LocalProvider, node0_id: str, rank: int) -> InstanceDir:
    token = InstanceDir(local.instances_dir / node0_id).read().client_token
    return InstanceDir(local.instances_dir / instance_id_for(node_token(token, rank)))


def test_two_node_torchrun_preempted_on_node_1_resumes_as_a_gang_with_the_uninterrupted_loss(tmp_path):
    reference = torch_runs.run(EXAMPLE / "train.py", tmp_path, ENV, "ref", nproc=2)
    with AssembledDaemon.start(tmp_path / "home") as d:
        local = d.adapter("local")
        job = d.submit({"name": "ddp", "run": TORCHRUN, "workdir": str(EXAMPLE), "nodes": 2,
                        "env": {**ENV, "STEP_SLEEP": "0.03", "PY": sys.executable},
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None, timeout_s=240)
        first = d.attempts(job)[-1]
        node1 = node_dir(local, first.instance_id, 1)
        assert node1.read().tags["gpuorch:node"] == "1-of-2"
        local.inject_preemption(node1.id, notice_s=20)  # node 1 is reclaimed; the gang's attempt ends
        d.until(lambda: len(d.attempts(job)) == 2, timeout_s=120)
        done = d.until_terminal(job, timeout_s=240)

        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED, (a1, a2)
        with d.store.read() as s:
            final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job, Checkpoint.final == True)).one()  # noqa: E712
        assert a2.resumed_from == final.name and final.step % 60  # rank 0's checkpoint taken on node 1's notice
        assert done.status == JobStatus.SUCCEEDED
        assert json.loads(done.result)["final_loss"] == reference["final_loss"]  # bitwise
        offer = next(o for o in local.offers() if o.zone == a1.zone and o.instance_type == a1.instance_type)
        assert a1.price_per_hour == pytest.approx(2 * (offer.spot_price_per_hour or 0))  # both nodes bill
        assert [i for i in local.list_managed() if i.state.alive] == []
        for attempt in (a1, a2):
            for rank in (0, 1):
                assert not node_dir(local, attempt.instance_id, rank).read().state.alive  # no node outlives its gang
        resumed = node_dir(local, a2.instance_id, 1).run_dir / "status.json"
        assert json.loads(resumed.read_text())["restored_from"] == final.name  # every node restored; one uploaded

"""Multi-node gangs on the local provider: N instance directories that the daemon sees as one
instance (node 0's id), as a cloud's cluster of N VMs behind one launch.

- **Launch** all or nothing (``gpuorch.provider.gang.launch_gang``): node k's directory comes
  from the token ``<node 0's token>-n<k>`` and carries the tag ``gpuorch:node=<k>-of-<N>``.
- **One fate**: when any node ends (preempted, terminated, killed), every other node is ended
  the same way; when any node is announced a preemption, every node is announced the same
  deadline, so every rank is signalled to checkpoint. ``observe_gang`` settles this on every
  ``get`` and ``list_managed``, so no node outlives its gang.
- **Runner**: one agent per node, each with torchrun's rendezvous environment (``MASTER_ADDR``
  127.0.0.1, one port per attempt); only node 0's agent uploads and hands off (rank 0's
  checkpoint is the job's), every node's restores. Status, log and metrics are node 0's.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from gpuorch.errors import NotFoundError
from gpuorch.provider import InstanceState
from gpuorch.provider.gang import node_of, node_token
from gpuorch.provider.gang_cloud import GangRunner as GangRunner  # one LocalRunner per node, 127.0.0.1
from gpuorch.provider.localdir import InstanceDir, Meta, instance_id_for
from gpuorch.provider.localdir.instances import REASON_PREEMPTED, REASON_TERMINATED

REASON_GANG = "gang-node-ended"  # why a node ended: another node of its gang did


def gang_dirs(instances_dir: Path, meta: Meta) -> list[InstanceDir] | None:
    """Every node's directory of the gang ``meta`` belongs to (node 0 first); None if it is a
    single instance."""
    node = node_of(meta.tags)
    if node is None:
        return None
    rank, nodes = node
    token0 = meta.client_token.removesuffix(f"-n{rank}") if rank else meta.client_token
    return [InstanceDir(instances_dir / instance_id_for(node_token(token0, k))) for k in range(nodes)]


def observe_gang(nodes: list[InstanceDir], now: datetime) -> Meta:
    """Node 0's record once the gang's one fate is settled (see the module docstring)."""
    metas: list[Meta | None] = []
    for d in nodes:
        try:
            metas.append(d.observe(now))
        except NotFoundError:  # not created yet (the gang's launch is under way): not an ending
            metas.append(None)
    if metas[0] is None:  # node 0 is created first and never removed: its gang is gone
        for d, m in zip(nodes, metas, strict=True):
            if m is not None and m.state.alive:
                d.end(InstanceState.TERMINATED, REASON_GANG, now)
        raise NotFoundError(f"local instance {nodes[0].id} not found")
    ended = [m for m in metas if m is not None and not m.state.alive]
    if ended:
        preempted = any(m.state == InstanceState.PREEMPTED for m in ended)
        state = InstanceState.PREEMPTED if preempted else InstanceState.TERMINATED
        for d, m in zip(nodes, metas, strict=True):
            if m is not None and m.state.alive:
                d.end(state, REASON_PREEMPTED if preempted else REASON_GANG, now)
    else:
        deadlines = [m.preemption_deadline for m in metas if m is not None and m.preemption_deadline]
        if deadlines:
            first = min(deadlines)
            for d, m in zip(nodes, metas, strict=True):
                if m is not None and m.preemption_deadline != first:
                    d.announce(first, now)
    return nodes[0].observe(now)


def end_gang(nodes: list[InstanceDir], now: datetime) -> None:
    for d in nodes:
        try:
            d.end(InstanceState.TERMINATED, REASON_TERMINATED, now)
        except NotFoundError:
            continue

"""Multi-node gangs (spec ``nodes: N``), the adapter kit's part: a provider that declares
``max_nodes > 1`` launches a gang from one ``LaunchRequest`` (``nodes`` set) with these, and
presents it to the daemon as one instance (the local provider: ``gpuorch_local.gang``).

- ``node_requests``: the N launch requests of one attempt (one client token and tag per node,
  one placement group named for the attempt).
- ``launch_gang``: all or nothing. Every node is launched idempotently; if any is refused for
  capacity, quota or for good, every node launched for the gang is terminated and the refusal
  is raised (the attempt ends ``no_capacity``); a transient error leaves the launched nodes for
  the next pass, whose repeated calls return them (their tokens) instead of new ones.
- ``rendezvous_env``: what torchrun needs on each node.
- ``gang_cost_per_hour``: a gang bills every node.
- ``master_port``: one rendezvous port per attempt, the same on every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpuorch.errors import NoCapacityError, PermanentError, ProviderError, QuotaError
from gpuorch.provider.port import TAG_NODE, Instance, LaunchRequest, client_token


class Launcher(Protocol):
    """What ``launch_gang`` needs: a provider's launch and terminate (one instance each)."""

    def launch(self, request: LaunchRequest) -> Instance: ...

    def terminate(self, instance_id: str) -> None: ...

MASTER_PORT = 29500  # torchrun's default


def placement_group_name(request: LaunchRequest) -> str:
    """One placement group per attempt (a relaunched gang may land in another zone): the
    attempt's client token, which is unique per installation, job and attempt."""
    return client_token(request.job_id, request.attempt, request.owner)


def node_requests(base: LaunchRequest, nodes: int) -> list[LaunchRequest]:
    """The gang's requests, node 0 first; node 0's client token is the single-node attempt's."""
    group = placement_group_name(base) if nodes > 1 else None
    return [base.model_copy(update={"node": k, "nodes": nodes, "placement_group": group}) for k in range(nodes)]


def launch_gang(provider: Launcher, requests: Sequence[LaunchRequest]) -> list[Instance]:
    """Launch every node or none; see the module docstring. Raises what the provider raised."""
    launched: list[Instance] = []
    try:
        for request in requests:
            launched.append(provider.launch(request))
    except (NoCapacityError, QuotaError, PermanentError):
        for inst in launched:  # a partial gang would bill while it can never train
            try:
                provider.terminate(inst.id)
            except ProviderError:
                pass  # the orphan sweep takes it: its attempt is ended
        raise
    return launched


def node_of(tags: dict[str, str]) -> tuple[int, int] | None:
    """``(rank, nodes)`` from a gang node's ``gpuorch:node`` tag; None for a single instance."""
    rank, sep, nodes = tags.get(TAG_NODE, "").partition("-of-")
    if not sep or not rank.isdigit() or not nodes.isdigit():
        return None
    return int(rank), int(nodes)


def node_token(token: str, rank: int) -> str:
    """The client token of node ``rank`` of the gang whose node 0 has ``token``."""
    return f"{token}-n{rank}" if rank else token


def rendezvous_env(node_rank: int, nodes: int, master_addr: str, nproc_per_node: int = 1,
                   master_port: int = MASTER_PORT) -> dict[str, str]:
    """torchrun's rendezvous variables for one node (``torchrun --nnodes $NNODES --node-rank
    $NODE_RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT --nproc-per-node
    $NPROC_PER_NODE`` reads them; ``WORLD_SIZE`` counts processes, not nodes) plus
    ``GPUORCH_NODE_RANK``. ``master_addr``: node 0's address on the gang's network."""
    if not 0 <= node_rank < nodes:
        raise ValueError(f"node rank {node_rank} is not in 0..{nodes - 1}")
    return {"MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port), "NODE_RANK": str(node_rank),
            "NNODES": str(nodes), "NPROC_PER_NODE": str(nproc_per_node), "LOCAL_WORLD_SIZE": str(nproc_per_node),
            "WORLD_SIZE": str(nodes * nproc_per_node), "GPUORCH_NODE_RANK": str(node_rank)}


def master_port(token: str, low: int = 20000, span: int = 20000) -> int:
    """A rendezvous port derived from the attempt's client token: every node computes the same,
    and two gangs on one host (the local provider) rarely share one."""
    import hashlib

    return low + int(hashlib.sha256(token.encode()).hexdigest(), 16) % span


def gang_cost_per_hour(price_per_hour: float, nodes: int) -> float:
    """What a gang bills per hour: every node at the offer's price (budget caps count them all)."""
    return price_per_hour * nodes

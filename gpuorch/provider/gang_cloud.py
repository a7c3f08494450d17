"""Multi-node gangs on a cloud adapter: the part AWS, GCP and Azure share (``CloudGangs``).

The adapter presents a gang to the daemon as node 0's instance, as the local provider does:

- **launch** (node 0 of ``nodes`` > 1): node 0 is looked for first (an ended gang is returned as
  it is: its attempt never gets a second group or more nodes); then the attempt's placement
  group is created (idempotent by its deterministic name, tagged with job and attempt) before
  any node, and the nodes are launched all or nothing (``gang.launch_gang``): on a refusal every
  node launched is terminated, the group is marked ended (deleted now or by the sweep) and the
  refusal raised, so the attempt ends ``no_capacity``.
- **get / list_managed**: the nodes are read together and one fate settled
  (``gang_decide.gang_view``): a node that ended ends every node; a notice on one is the gang's.
- **terminate**: every node, then the group (best effort: a cloud refuses to delete a group
  its ending nodes still hold; the sweep deletes it later).
- **sweep**, on every ``list_managed``: placement groups whose gang ended, or that stood empty
  for the grace (a crash between the group and node 0), are deleted
  (``gang_decide.groups_to_delete``); nodes whose gang is gone are terminated.
- **runner**: one runner per node; each node's agent gets torchrun's rendezvous environment
  with node 0's private address as ``MASTER_ADDR``; only node 0's agent uploads.

An adapter subclasses ``CloudGangs`` before ``Provider``, implements the hooks (``_node_*`` and
``_group_*``), and routes its port methods through ``_gang_*`` for instances tagged
``gpuorch:node`` (``gang.node_of``).
"""

from __future__ import annotations

import dataclasses
import logging
from abc import abstractmethod
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, ProviderError, QuotaError
from gpuorch.provider.gang import launch_gang, master_port, node_of, node_requests, rendezvous_env
from gpuorch.provider.gang_decide import GROUP_GRACE_S, PlacementGroup, gang_view, groups_to_delete, present
from gpuorch.provider.port import Instance, LaunchRequest, client_token
from gpuorch.runners.port import Runner, RunnerUnavailable

log = logging.getLogger("gpuorch.gang")


class CloudGangs:
    """Mixin of a cloud adapter with ``max_nodes > 1``; see the module docstring."""

    gang_grace_s: float = GROUP_GRACE_S
    _monotonic: Callable[[], float]  # the adapter's clocks (tests move them): the sweep's grace,
    _now: Callable[[], datetime]  # and node ages

    # -- hooks the adapter implements ----------------------------------------------------------
    @abstractmethod
    def _node_launch(self, request: LaunchRequest) -> Instance:
        """Launch one node (the single-instance launch, placed in ``request.placement_group``)."""

    @abstractmethod
    def _node_find(self, request: LaunchRequest) -> Instance | None:
        """The instance of ``request``'s client token if it exists, in any state; else None."""

    @abstractmethod
    def _nodes_of(self, node: Instance) -> list[Instance]:
        """Every listed node of ``node``'s gang (its attempt's instances tagged ``gpuorch:node``)."""

    @abstractmethod
    def _nodes_terminate(self, ids: list[str]) -> None:
        """Terminate these single instances; quiet for ones already gone."""

    @abstractmethod
    def _node_address(self, node: Instance) -> str | None:
        """The node's private address on the gang's network (None: not known yet)."""

    @abstractmethod
    def _node_runner(self, node: Instance) -> Runner:
        """The single-instance runner of one node."""

    @abstractmethod
    def _group_create(self, request: LaunchRequest) -> None:
        """Create the attempt's placement group (``request.placement_group``) in the request's
        zone/region, tagged with ``request``'s managed tags; quiet if it exists."""

    @abstractmethod
    def _group_list(self) -> list[PlacementGroup]:
        """The placement groups carrying gpuorch's managed tags."""

    @abstractmethod
    def _group_delete(self, group: PlacementGroup) -> None:
        """Delete a group; quiet if gone; ProviderError while the cloud refuses (still in use)."""

    @abstractmethod
    def _group_at(self, token: str, region: str, zone: str, tags: dict[str, str]) -> PlacementGroup:
        """The placement group of the gang whose attempt's client token is ``token``, launched in
        ``zone`` of ``region`` (the adapter's name for it, derived from the token)."""

    # -- what the port methods call ------------------------------------------------------------
    def _gang_launch(self, request: LaunchRequest) -> Instance:
        found = self._node_find(request)
        if found is not None and not found.state.alive:
            return self._gang_observe(found)  # an ended gang: no new group, no new nodes
        requests = node_requests(request, request.nodes)
        self._group_create(requests[0])
        try:
            nodes = launch_gang(_Nodes(self), requests)  # a transient error: the launched nodes stay for the repeat
        except (NoCapacityError, QuotaError, PermanentError):  # refused: launch_gang released every node
            o = request.offer
            self._gang_end_group(self._group_at(requests[0].placement_group or "", o.region, o.zone, request.tags))
            raise
        return gang_view(nodes, self._now(), self.gang_grace_s)[0]  # as launched (a listing may lag)

    def _gang_observe(self, node: Instance) -> Instance:
        """The gang ``node`` belongs to, as its node 0, with its one fate applied."""
        listed = {n.id: n for n in self._nodes_of(node)}
        listed.setdefault(node.id, node)  # a listing may lag the node just read
        nodes = list(listed.values())
        if not any(node_of(n.tags) == (0, node_of(node.tags)[1]) for n in nodes):  # type: ignore[index]
            doomed = [n.id for n in nodes if n.state.alive]
            if doomed:
                self._nodes_terminate(doomed)
            raise NotFoundError(f"{node.id}: its gang's node 0 is gone")
        view, doomed = gang_view(nodes, self._now(), self.gang_grace_s)
        if doomed:
            log.info("gang of %s ended (%s): terminating nodes %s", view.id, view.state_reason, doomed)
            self._nodes_terminate(doomed)
        return view

    def _gang_present(self, listed: list[Instance]) -> list[Instance]:
        """``list_managed``'s answer from the raw listing: gangs as node 0, one fate applied, and
        the placement-group sweep run (errors logged: the next listing retries)."""
        out, doomed = present(listed, self._now(), self.gang_grace_s)
        if doomed:
            log.info("gang nodes whose gang ended: terminating %s", doomed)
            self._nodes_terminate(doomed)
        try:
            groups = self._group_list()
        except ProviderError as e:
            log.warning("placement groups not listed (swept next time): %s", e)
            return out
        now = self._monotonic()
        empty = self._gang_empty_since()
        for group in groups_to_delete(groups, listed, self._gang_ended(), empty, now, self.gang_grace_s):
            try:
                self._group_delete(group)
            except ProviderError as e:
                log.info("placement group %s not deleted yet: %s", group.name, e)
                continue
            log.info("deleted placement group %s (its gang ended)", group.name)
            self._gang_ended().discard(group.name)
            empty.pop(group.name, None)
        return out

    def _gang_terminate(self, node: Instance) -> None:
        try:
            nodes = self._nodes_of(node)
        except NotFoundError:
            nodes = [node]
        self._nodes_terminate([n.id for n in nodes] or [node.id])
        self._gang_end_group(self._group_at(_token(node), node.region, node.zone, node.tags))

    def _gang_runner(self, gang: Instance) -> Runner:
        nodes = sorted(self._nodes_of(gang), key=lambda n: node_of(n.tags) or (0, 0))
        size = node_of(gang.tags)[1]  # type: ignore[index]
        if len(nodes) != size:
            raise RunnerUnavailable(f"gang of {gang.id}: {len(nodes)} of {size} nodes listed")
        address = self._node_address(nodes[0])
        if not address:
            raise RunnerUnavailable(f"gang of {gang.id}: node 0 has no private address yet")
        runners = [self._node_runner(n) for n in nodes]
        return GangRunner(runners, nproc_per_node=max(1, self._gang_gpus(gang)), port=master_port(_token(gang)),
                          master_addr=address)

    def _gang_gpus(self, gang: Instance) -> int:
        """GPUs per node (torchrun's processes per node): the offer's for the node's type and zone."""
        offers = getattr(self, "offers", None)
        try:
            found = [o for o in (offers() if offers else [])
                     if o.instance_type == gang.instance_type and o.zone == gang.zone]
        except ProviderError:
            found = []
        return found[0].gpu_count if found else 1

    def _gang_end_group(self, group: PlacementGroup) -> None:
        """Mark the group's gang ended and try to delete it now (a cloud refuses while the ending
        nodes still hold it: the sweep deletes it later)."""
        self._gang_ended().add(group.name)
        try:
            self._group_delete(group)
        except ProviderError as e:
            log.info("placement group %s left to the sweep: %s", group.name, e)
        else:
            self._gang_ended().discard(group.name)

    # -- state ---------------------------------------------------------------------------------
    def _gang_ended(self) -> set[str]:
        if not hasattr(self, "_gang_ended_groups"):
            self._gang_ended_groups: set[str] = set()
        return self._gang_ended_groups

    def _gang_empty_since(self) -> dict[str, float]:
        if not hasattr(self, "_gang_empty"):
            self._gang_empty: dict[str, float] = {}
        return self._gang_empty


def _token(node: Instance) -> str:
    """The client token of the attempt ``node`` belongs to (node 0's: the gang's group and port)."""
    return client_token(node.job_id or 0, node.attempt or 0, node.owner)


class _Nodes:
    """The adapter's single-node launch and terminate, for ``launch_gang``."""

    def __init__(self, gangs: CloudGangs) -> None:
        self.gangs = gangs

    def launch(self, request: LaunchRequest) -> Instance:
        return self.gangs._node_launch(request)

    def terminate(self, instance_id: str) -> None:
        self.gangs._nodes_terminate([instance_id])


class GangRunner(Runner):
    """The Runner of a gang: one runner per node, each agent with torchrun's rendezvous
    environment (``master_addr``: node 0's private address), only node 0's uploading and
    handing off (rank 0's checkpoint is the job's). Status, log and metrics are node 0's."""

    def __init__(self, runners: list[Runner], nproc_per_node: int, port: int, master_addr: str = "127.0.0.1") -> None:
        self.runners, self.nproc, self.port, self.master_addr = runners, nproc_per_node, port, master_addr

    def node_config(self, config: AgentConfig, rank: int) -> AgentConfig:
        """What node ``rank``'s agent is started with."""
        env = {**config.env, **rendezvous_env(rank, len(self.runners), self.master_addr, self.nproc, self.port)}
        return dataclasses.replace(config, env=env, upload_checkpoints=rank == 0)

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        """Start every node's agent (idempotent per node); RunnerUnavailable while one is not up."""
        for rank, runner in enumerate(self.runners):
            runner.start(self.node_config(config, rank), workdir)

    def status(self) -> AgentStatus | None:
        return self.runners[0].status()

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.runners[0].read_log(offset, limit)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.runners[0].read_metrics(offset, limit)

    def heartbeat(self) -> None:
        for runner in self.runners:
            runner.heartbeat()

    def request_stop(self, deadline: float) -> None:
        for runner in self.runners:
            runner.request_stop(deadline)

"""A cloud gang's decisions, as pure functions over what the adapter listed (no SDK, no I/O).

A cloud adapter that declares ``max_nodes > 1`` (``gpuorch.provider.gang_cloud.CloudGangs``)
lists the instances and placement groups it owns, asks these what they mean, and applies the
answer (terminate these nodes, delete these groups):

- ``gang_view``: the gang as the daemon sees it, node 0's instance with the gang's state (one
  fate: a node that ended ends the gang; a notice on one node is a notice to all).
- ``present``: ``list_managed``'s answer, each gang as its node 0, plus the nodes whose gang is
  gone (node 0 no longer listed) that must be ended.
- ``groups_to_delete``: the orphan sweep of placement groups: a group goes once its gang ended,
  or once it has stood empty for the grace (a crash between the group and node 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpuorch.provider.gang import node_of
from gpuorch.provider.port import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_OWNER, Instance, InstanceState

GANG_ENDED = "gang-node-ended"  # why the gang ended: one of its nodes did
GANG_LOST = "gang-node-lost"  # why the gang ended: one of its nodes is no longer listed
GROUP_GRACE_S = 900.0  # longer than any one launch call: an empty group younger than this may be in use

AttemptKey = tuple[str, str, str]  # (owner, job, attempt) as tagged


def attempt_key(tags: Mapping[str, str]) -> AttemptKey | None:
    """The attempt a managed resource is tagged for; None for one that is not gpuorch's."""
    if tags.get(TAG_MANAGED) != "true" or not tags.get(TAG_JOB) or not tags.get(TAG_ATTEMPT):
        return None
    return tags.get(TAG_OWNER, ""), tags[TAG_JOB], tags[TAG_ATTEMPT]


@dataclass(frozen=True)
class PlacementGroup:
    """A gang's placement group as an adapter lists it. ``name``: the adapter's id for it
    (its deterministic name); ``where``: its region or zone; ``tags``: the attempt's."""

    name: str
    where: str
    tags: dict[str, str] = field(default_factory=dict)


def gang_view(nodes: Sequence[Instance], now: datetime, grace_s: float = GROUP_GRACE_S) -> tuple[Instance, list[str]]:
    """``(node 0 as the gang, ids of live nodes to terminate)`` for the listed nodes of one gang.

    - Any node ended: the gang ended (PREEMPTED if any node was reclaimed, else TERMINATED);
      every live node is to be terminated.
    - A node missing while node 0 is older than ``grace_s``: lost; the gang ended likewise.
      Younger: the launch is under way (a transient error mid-gang), the gang reads PENDING.
    - Else PENDING until every node runs; the earliest preemption deadline of any node is the
      gang's (every rank checkpoints for it).
    ``nodes`` must hold node 0 (the caller handles a gang without it: ``present``).
    """
    ranked = sorted((n for n in nodes if node_of(n.tags)), key=lambda n: _rank(n))
    node0 = ranked[0]
    if _rank(node0) != 0:
        raise ValueError(f"gang of {node0.id} has no node 0 listed")
    size = node_of(node0.tags)[1]  # type: ignore[index]  # node 0 has its tag (sorted above)
    ended = [n for n in ranked if not n.state.alive]
    alive = [n.id for n in ranked if n.state.alive]
    missing = size - len({_rank(n) for n in ranked})
    old = node0.created_at is not None and now - node0.created_at > timedelta(seconds=grace_s)
    if ended or (missing and old):
        preempted = [n for n in ended if n.state == InstanceState.PREEMPTED]
        state = InstanceState.PREEMPTED if preempted else InstanceState.TERMINATED
        reason = (preempted[0].state_reason if preempted else None) or (GANG_ENDED if ended else GANG_LOST)
        if not node0.state.alive:
            return node0, alive
        ended_at = max((n.ended_at for n in ended if n.ended_at), default=None)
        return node0.model_copy(update={"state": state, "state_reason": reason, "host": None, "port": None,
                                        "preemption_deadline": None, "ended_at": ended_at}), alive
    deadlines = [n.preemption_deadline for n in ranked if n.preemption_deadline is not None]
    update: dict[str, object] = {"preemption_deadline": min(deadlines) if deadlines else None}
    if missing or any(n.state == InstanceState.PENDING for n in ranked):
        update.update(state=InstanceState.PENDING, host=None, port=None)  # the runner waits for every node
    return node0.model_copy(update=update), []


def present(instances: Iterable[Instance], now: datetime,
            grace_s: float = GROUP_GRACE_S) -> tuple[list[Instance], list[str]]:
    """``(what list_managed reports, ids of live nodes to terminate)``: single instances as they
    are, each gang as ``gang_view``'s node 0; a gang whose node 0 is no longer listed is gone,
    and its live nodes older than ``grace_s`` are to be terminated (a younger one may be a
    launch in progress that a listing does not show node 0 of yet)."""
    out: list[Instance] = []
    gangs: dict[AttemptKey, list[Instance]] = {}
    for inst in instances:
        key = attempt_key(inst.tags)
        if key is None or node_of(inst.tags) is None:
            out.append(inst)
        else:
            gangs.setdefault(key, []).append(inst)
    doomed: list[str] = []
    for nodes in gangs.values():
        if any(_rank(n) == 0 for n in nodes):
            view, end = gang_view(nodes, now, grace_s)
            out.append(view)
            doomed += end
        else:
            doomed += [n.id for n in nodes if n.state.alive and n.created_at is not None
                       and now - n.created_at > timedelta(seconds=grace_s)]
    return out, doomed


def groups_to_delete(groups: Iterable[PlacementGroup], instances: Iterable[Instance], ended: set[str],
                     empty_since: dict[str, float], now_s: float,
                     grace_s: float = GROUP_GRACE_S) -> list[PlacementGroup]:
    """The placement groups to delete now. ``instances``: every listed node (raw, not
    ``present``'s view); ``ended``: names of groups whose gang this adapter ended (terminate,
    a refused launch); ``empty_since``: group name -> when (``now_s``'s clock) it was first seen
    without any node, updated in place.

    A group with a live node stays. One whose nodes all ended goes (its attempt never launches
    again). One without any listed node goes if its gang was ended here, or once it has stood
    empty for ``grace_s``: a launch creates the group just before node 0, so a young empty group
    may be in use; an old one is left from a crash, or its ended nodes are no longer listed.
    """
    nodes: dict[AttemptKey, list[Instance]] = {}
    for inst in instances:
        key = attempt_key(inst.tags)
        if key is not None and node_of(inst.tags) is not None:
            nodes.setdefault(key, []).append(inst)
    out = []
    for group in groups:
        key = attempt_key(group.tags)
        if key is None:
            continue  # not gpuorch's
        members = nodes.get(key, [])
        if any(n.state.alive for n in members):
            empty_since.pop(group.name, None)
            continue
        if members or group.name in ended:
            out.append(group)
            continue
        first = empty_since.setdefault(group.name, now_s)
        if now_s - first >= grace_s:
            out.append(group)
    return out


def _rank(inst: Instance) -> int:
    node = node_of(inst.tags)
    return node[0] if node else -1

"""The cloud gang's pure decisions (``gpuorch.provider.gang_decide``): one fate, the listing's view
and the placement-group sweep, on hand-made instances."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuorch.provider.gang_decide import GANG_ENDED, GANG_LOST, PlacementGroup, gang_view, groups_to_delete, present
from gpuorch.provider.port import TAG_NODE, Instance, InstanceState, managed_tags

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def node(rank: int, size: int = 3, state: InstanceState = InstanceState.RUNNING, attempt: int = 1,
         age_s: float = 60, deadline: datetime | None = None) -> Instance:
    tags = {**managed_tags(7, attempt, "abc"), TAG_NODE: f"{rank}-of-{size}"}
    return Instance(id=f"i-{attempt}-{rank}", provider="x", region="r", zone="r-a", instance_type="t", spot=True,
                    state=state, tags=tags, created_at=NOW - timedelta(seconds=age_s), host=f"10.0.0.{rank}",
                    preemption_deadline=deadline)


def group(attempt: int = 1) -> PlacementGroup:
    return PlacementGroup(name=f"g{attempt}", where="r", tags=managed_tags(7, attempt, "abc"))


def test_a_running_gang_is_node_0_with_the_earliest_deadline_of_any_node():
    soon, later = NOW + timedelta(minutes=2), NOW + timedelta(minutes=5)
    view, doomed = gang_view([node(2, deadline=later), node(0), node(1, deadline=soon)], NOW)
    assert (view.id, view.state, view.preemption_deadline, doomed) == ("i-1-0", InstanceState.RUNNING, soon, [])


def test_one_ended_node_ends_the_gang_and_dooms_the_live_ones():
    view, doomed = gang_view([node(0), node(1, state=InstanceState.PREEMPTED), node(2)], NOW)
    assert view.state == InstanceState.PREEMPTED and view.host is None
    assert sorted(doomed) == ["i-1-0", "i-1-2"]
    view, _ = gang_view([node(0), node(1, state=InstanceState.TERMINATED), node(2)], NOW)
    assert (view.state, view.state_reason) == (InstanceState.TERMINATED, GANG_ENDED)


def test_a_gang_with_a_booting_or_missing_node_is_pending_until_its_grace_then_lost():
    assert gang_view([node(0), node(1, state=InstanceState.PENDING), node(2)], NOW)[0].state == InstanceState.PENDING
    young = gang_view([node(0), node(1)], NOW)  # node 2 not listed: the launch is under way
    assert young == (young[0], []) and young[0].state == InstanceState.PENDING
    view, doomed = gang_view([node(0, age_s=3600), node(1, age_s=3600)], NOW)
    assert (view.state, view.state_reason, sorted(doomed)) == (InstanceState.TERMINATED, GANG_LOST, ["i-1-0", "i-1-1"])


def test_the_listing_shows_each_gang_once_and_ends_nodes_whose_node_0_is_gone():
    single = node(0).model_copy(update={"id": "i-single", "tags": managed_tags(8, 1, "abc")})
    orphan_old, orphan_young = node(1, attempt=2, age_s=3600), node(2, attempt=2, age_s=5)
    out, doomed = present([single, node(1), node(0), node(2), orphan_old, orphan_young], NOW)
    assert sorted(i.id for i in out) == ["i-1-0", "i-single"]
    assert doomed == ["i-2-1"]  # the young one may belong to a launch whose node 0 a listing lags


def test_groups_go_when_their_gang_ended_or_after_standing_empty_for_the_grace():
    empty: dict[str, float] = {}
    live = [node(0), node(1), node(2)]
    assert groups_to_delete([group(1)], live, set(), empty, 0.0) == []
    ended = [n.model_copy(update={"state": InstanceState.TERMINATED}) for n in live]
    assert groups_to_delete([group(1)], ended, set(), empty, 0.0) == [group(1)]
    assert groups_to_delete([group(2)], [], set(), empty, 0.0) == []  # empty: a launch may be under way
    assert groups_to_delete([group(2)], [], set(), empty, 899.0) == []
    assert groups_to_delete([group(2)], [], set(), empty, 900.0) == [group(2)]
    assert groups_to_delete([group(3)], [], {"g3"}, {}, 0.0) == [group(3)]  # ended here: no need to wait
    foreign = PlacementGroup(name="theirs", where="r", tags={"team": "x"})
    assert groups_to_delete([foreign], [], {"theirs"}, {}, 10**6) == []  # not gpuorch's: never

"""Multi-node gangs: all-or-nothing launch against the fake provider, and the rendezvous
environment every node gets."""

from __future__ import annotations

import pytest

from gpuorch.errors import NoCapacityError, TransientError
from gpuorch.provider.gang import gang_cost_per_hour, launch_gang, node_requests, rendezvous_env
from gpuorch.provider.port import TAG_NODE, LaunchRequest
from gpuorch.testing.fake_provider import FakeProvider


class RefusesNode(FakeProvider):
    """The fake provider, refusing one node of a gang (its market ran out mid-gang)."""

    def __init__(self, refused: int, error: Exception) -> None:
        super().__init__()
        self.refused, self.error = refused, error

    def launch(self, request: LaunchRequest) -> object:  # type: ignore[override]
        if request.node == self.refused and self.error is not None:
            self._record("launch", request.client_token)
            raise self.error
        return super().launch(request)


def base(provider: FakeProvider) -> LaunchRequest:
    offer = provider.offers()[0]
    return LaunchRequest(job_id=7, attempt=2, offer=offer, spot=offer.spot_price_per_hour is not None, owner="abc")


def test_one_node_refused_leaves_none_running():
    fake = RefusesNode(refused=2, error=NoCapacityError("no capacity", code="InsufficientInstanceCapacity"))
    with pytest.raises(NoCapacityError):
        launch_gang(fake, node_requests(base(fake), 4))
    assert [c[0] for c in fake.calls].count("launch") == 3  # nodes 0 and 1 launched, 2 refused, 3 never tried
    assert fake.live_instances() == []  # nodes 0 and 1 terminated: nothing bills for a gang that cannot train


def test_a_transient_error_keeps_the_launched_nodes_and_the_retry_adds_none():
    fake = RefusesNode(refused=1, error=TransientError("throttled"))
    requests = node_requests(base(fake), 3)
    with pytest.raises(TransientError):
        launch_gang(fake, requests)
    [node0] = fake.live_instances()
    fake.error = None  # the next pass: the same idempotent calls
    gang = launch_gang(fake, requests)
    assert gang[0].id == node0.id and len({i.id for i in gang}) == 3 and len(fake.live_instances()) == 3


def test_each_node_has_its_own_token_and_tag_and_the_gang_one_placement_group():
    requests = node_requests(base(FakeProvider()), 3)
    assert requests[0].client_token == "gpuorch-abc-7-2"  # node 0's is the single-node attempt's
    assert [r.client_token for r in requests[1:]] == ["gpuorch-abc-7-2-n1", "gpuorch-abc-7-2-n2"]
    assert [r.tags[TAG_NODE] for r in requests] == ["0-of-3", "1-of-3", "2-of-3"]
    assert {r.placement_group for r in requests} == {"gpuorch-abc-7-2"}
    single = node_requests(base(FakeProvider()), 1)[0]
    assert TAG_NODE not in single.tags and single.placement_group is None


def test_every_node_gets_torchruns_rendezvous_environment():
    envs = [rendezvous_env(rank, 2, "10.0.0.5", nproc_per_node=8) for rank in range(2)]
    assert envs[1] == {"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500", "NODE_RANK": "1", "NNODES": "2",
                       "NPROC_PER_NODE": "8", "LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "16", "GPUORCH_NODE_RANK": "1"}
    assert envs[0]["NODE_RANK"] == envs[0]["GPUORCH_NODE_RANK"] == "0"
    with pytest.raises(ValueError):
        rendezvous_env(2, 2, "10.0.0.5")


def test_a_gang_bills_every_node():
    assert gang_cost_per_hour(32.77, 4) == pytest.approx(131.08)

"""Gangs (spec ``nodes:``) on ``AzureProvider`` against the fake ARM (real SDK client, TLS): the
gang contract, plus the proximity placement group every node is created in, a crash between
the group and the nodes, and a group ARM will not delete while a VM still references it."""

from __future__ import annotations

from typing import Any

import pytest
from azure_helpers import StaticToken, options, zonal_offers
from fake_arm import FakeArm

from gpuorch.errors import NoCapacityError, TransientError
from gpuorch.provider.gang import node_requests
from gpuorch.provider.port import TAG_NODE, Instance, LaunchRequest, Offer, Provider
from gpuorch.testing.gang_contract import GangContract
from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options

pytestmark = pytest.mark.azure


@pytest.fixture
def make_provider(arm: FakeArm, tmp_path: Any) -> Any:
    """Providers selling zonal offers (the catalog's Azure rows here are regional)."""
    made: list[AzureProvider] = []

    def make() -> AzureProvider:
        p = AzureProvider(parse_options(options(arm)), home=tmp_path / "home", credential=StaticToken(arm.token),
                          sleep=lambda s: None, now=arm.now, monotonic=lambda: arm.clock, offers=zonal_offers())
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def gang_offer(provider: AzureProvider) -> Offer:
    return next(o for o in provider.offers() if o.zone == "eastus-1")


class TestAzureGangContract(GangContract):
    end_timeout_s = 5.0

    @pytest.fixture
    def provider(self, make_provider: Any, arm: FakeArm) -> AzureProvider:
        self.arm = arm
        return make_provider()

    @pytest.fixture
    def offer(self, provider: AzureProvider) -> Offer:
        return gang_offer(provider)

    def advance(self, provider: Provider, seconds: float) -> None:
        self.arm.advance(seconds)

    def groups(self, provider: Provider) -> list[dict[str, str]]:
        return [dict(g["tags"]) for g in self.arm.ppgs.values()]

    def nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        assert isinstance(provider, AzureProvider)
        names = [n for n, vm in self.arm.vms.items()
                 if vm["tags"].get("gpuorch:job") == str(gang.job_id)
                 and vm["tags"].get("gpuorch:attempt") == str(gang.attempt) and TAG_NODE in vm["tags"]]
        return sorted((provider._observe(provider.client().get_vm(n)) for n in names), key=lambda n: n.tags[TAG_NODE])

    def refuse_node(self, provider: Provider, offer: Offer, rank: int) -> None:
        # Node ``rank`` is the (rank + 1)-th create: let the ones before it through.
        self.arm.refuse("AllocationFailed", stage="operation", size=offer.instance_type, count=None)
        refusal = self.arm.refusals[-1]
        seen = {"n": 0}
        original = refusal.matches

        def nth(size: str, region: str, spot: bool) -> bool:
            if not original(size, region, spot):
                return False
            seen["n"] += 1
            return seen["n"] == rank + 1

        refusal.matches = nth  # type: ignore[method-assign]

    def end_node(self, provider: Provider, node: Instance) -> None:
        provider.get(node.id)  # watched: an eviction then reads PREEMPTED (docs/azure.md)
        self.arm.evict(node.id)

    def private_address(self, provider: Provider, node: Instance) -> str:
        nic = self.arm.vms[node.id]["_nics"][0][0]
        return str(self.arm.nics[nic]["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"])


def gang_request(offer: Offer, nodes: int = 3) -> LaunchRequest:
    return LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False, owner="abc", nodes=nodes)


def test_every_node_is_created_in_the_attempts_proximity_placement_group(make_provider: Any, arm: FakeArm) -> None:
    provider = make_provider()
    offer = gang_offer(provider)
    gang = provider.launch(gang_request(offer))
    [(name, group)] = arm.ppgs.items()
    assert name == "gpuorch-abc-7-1" and group["location"] == offer.region
    assert group["zones"] == [offer.zone.rsplit("-", 1)[1]]
    assert group["properties"]["intent"] == {"vmSizes": [offer.instance_type]}
    assert group["tags"] == {"gpuorch:managed": "true", "gpuorch:job": "7", "gpuorch:attempt": "1",
                             "gpuorch:owner": "abc"}
    assert arm.ppg_members("gpuorch-abc-7-1") == ["gpuorch-abc-7-1", "gpuorch-abc-7-1-n1", "gpuorch-abc-7-1-n2"]
    assert gang.id == "gpuorch-abc-7-1" and gang.tags[TAG_NODE] == "0-of-3"


def test_a_crash_after_the_group_makes_no_second_and_the_repeat_launches_the_nodes(
    make_provider: Any, arm: FakeArm
) -> None:
    provider = make_provider()
    offer = gang_offer(provider)
    # ARM unreachable between the group and node 0 (retries spent): what a crash there leaves
    arm.fail_http(503, "ServiceUnavailable", method="PUT", path="/virtualMachines/", count=50)
    with pytest.raises(TransientError):
        provider.launch(gang_request(offer, nodes=2))
    arm.http_failures.clear()
    assert list(arm.ppgs) == ["gpuorch-abc-7-1"]
    gang = make_provider().launch(gang_request(offer, nodes=2))
    puts = [r for r in arm.requests if r["method"] == "PUT" and "proximityPlacementGroups" in r["path"]]
    assert len(puts) == 1  # looked before creating
    assert arm.ppg_members("gpuorch-abc-7-1") == ["gpuorch-abc-7-1", "gpuorch-abc-7-1-n1"]
    assert gang.tags[TAG_NODE] == "0-of-2"


def test_a_group_left_by_a_crash_before_node_0_is_swept_after_the_grace(make_provider: Any, arm: FakeArm) -> None:
    provider = make_provider()
    provider._group_create(node_requests(gang_request(gang_offer(provider), nodes=2), 2)[0])
    provider.list_managed()
    arm.advance(provider.gang_grace_s - 1)
    provider.list_managed()
    assert list(arm.ppgs) == ["gpuorch-abc-7-1"]
    arm.advance(1)
    provider.list_managed()
    assert arm.ppgs == {}


def test_the_group_outlives_its_nodes_deletion_and_goes_with_the_next_sweep(make_provider: Any, arm: FakeArm) -> None:
    provider = make_provider()
    arm.delete_s = 60.0  # VM deletions take a minute here
    gang = provider.launch(gang_request(gang_offer(provider), nodes=2))
    provider.terminate(gang.id)
    assert list(arm.ppgs) == ["gpuorch-abc-7-1"], "ARM refuses while the nodes are still being deleted"
    arm.advance(61)
    provider.list_managed()
    assert arm.ppgs == {}


def test_a_refused_node_deletes_the_others(make_provider: Any, arm: FakeArm) -> None:
    provider = make_provider()
    offer = gang_offer(provider)
    arm.refuse("SkuNotAvailable", size=offer.instance_type, count=None)
    refusal = arm.refusals[-1]
    calls = {"n": 0}
    original = refusal.matches

    def third(size: str, region: str, spot: bool) -> bool:
        calls["n"] += original(size, region, spot)
        return original(size, region, spot) and calls["n"] == 3

    refusal.matches = third  # type: ignore[method-assign]
    with pytest.raises(NoCapacityError):
        provider.launch(gang_request(offer))
    assert arm.vms == {} and arm.ppgs == {}

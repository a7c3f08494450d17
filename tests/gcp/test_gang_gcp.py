"""Gangs (spec ``nodes:``) on ``GcpProvider`` against the fake GCE (real SDK client): the gang
contract, plus the compact placement policy the nodes are bound to, a crash between the policy
and the nodes, and a policy GCE will not delete while a VM still uses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_gce import FakeGce

from gpuorch.errors import NoCapacityError, TransientError
from gpuorch.provider.gang import node_requests
from gpuorch.provider.port import TAG_NODE, Instance, LaunchRequest, Offer, Provider
from gpuorch.testing.gang_contract import GangContract
from gpuorch_gcp import GcpProvider
from gpuorch_gcp.names import tags_from_labels

pytestmark = pytest.mark.gcp


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def gang_offer(provider: GcpProvider) -> Offer:
    return min((o for o in provider.offers() if o.gpu_count >= 1 and o.zone == "us-central1-a"),
               key=lambda o: o.price_per_hour)


class TestGcpGangContract(GangContract):
    end_timeout_s = 5.0

    @pytest.fixture
    def provider(self, make_provider: Any, fake: FakeGce, tmp_path: Path) -> GcpProvider:
        self.fake = fake
        provider = make_provider(home=tmp_path)
        self.clock = Clock()
        provider._monotonic = self.clock
        return provider

    @pytest.fixture
    def offer(self, provider: GcpProvider) -> Offer:
        return gang_offer(provider)

    def advance(self, provider: Provider, seconds: float) -> None:
        self.clock.t += seconds
        self.fake.advance(seconds)

    def groups(self, provider: Provider) -> list[dict[str, str]]:
        return [json.loads(p["description"]) for p in self.fake.policies.values()]

    def nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        """The gang's VMs as the fake holds them, each read through the SDK one by one."""
        assert isinstance(provider, GcpProvider)
        keys = [f"{zone}/{name}" for (zone, name), d in self.fake.instances.items()
                if (tags := tags_from_labels(d.get("labels") or {})).get("gpuorch:job") == str(gang.job_id)
                and tags.get("gpuorch:attempt") == str(gang.attempt) and TAG_NODE in tags]
        return sorted((provider._get_one(k) for k in keys), key=lambda n: n.tags[TAG_NODE])

    def refuse_node(self, provider: Provider, offer: Offer, rank: int) -> None:
        self.fake.refuse("ZONE_RESOURCE_POOL_EXHAUSTED", zone=offer.zone)
        refusal = self.fake.refusals[-1]
        refusal.when = lambda z, body: str(body.get("name", "")).endswith(f"-n{rank}")

    def end_node(self, provider: Provider, node: Instance) -> None:
        zone, name = node.id.split("/", 1)
        self.fake.preempt(zone, name, notice_s=0.0)
        self.fake.advance(0.1)

    def notice_node(self, provider: Provider, node: Instance, notice_s: float) -> None:
        zone, name = node.id.split("/", 1)
        self.fake.preempt(zone, name, notice_s)

    def private_address(self, provider: Provider, node: Instance) -> str:
        zone, name = node.id.split("/", 1)
        return str(self.fake.instances[(zone, name)]["networkInterfaces"][0]["networkIP"])


def gang_request(offer: Offer, nodes: int = 3) -> LaunchRequest:
    return LaunchRequest(job_id=7, attempt=1, offer=offer, spot=False, owner="abc", nodes=nodes)


def test_every_node_is_bound_to_the_attempts_compact_placement_policy(make_provider: Any, fake: FakeGce) -> None:
    provider = make_provider()
    offer = gang_offer(provider)
    gang = provider.launch(gang_request(offer))
    [(key, policy)] = fake.policies.items()
    assert key == ("us-central1", "gpuorch-abc-7-1")
    assert policy["groupPlacementPolicy"] == {"vmCount": 3, "collocation": "COLLOCATED"}
    assert json.loads(policy["description"]) == {"gpuorch:managed": "true", "gpuorch:job": "7", "gpuorch:attempt": "1",
                                                 "gpuorch:owner": "abc"}
    users = sorted(d["name"] for d in fake.policy_users("us-central1", "gpuorch-abc-7-1"))
    assert users == ["gpuorch-abc-7-1", "gpuorch-abc-7-1-n1", "gpuorch-abc-7-1-n2"]
    assert gang.id == f"{offer.zone}/gpuorch-abc-7-1" and gang.tags[TAG_NODE] == "0-of-3"


def test_a_crash_after_the_policy_makes_no_second_and_the_repeat_launches_the_nodes(
    make_provider: Any, fake: FakeGce
) -> None:
    provider = make_provider()
    offer = gang_offer(provider)
    # GCE unreachable between the policy and node 0 (retries spent): what a crash there leaves
    fake.fail_http("POST", r"/instances$", 503, times=50)
    with pytest.raises(TransientError):
        provider.launch(gang_request(offer, nodes=2))
    fake.http_failures.clear()
    assert list(fake.policies) == [("us-central1", "gpuorch-abc-7-1")]
    gang = make_provider().launch(gang_request(offer, nodes=2))
    assert list(fake.policies) == [("us-central1", "gpuorch-abc-7-1")]
    inserts = [p for m, p in fake.requests if m == "POST" and p.endswith("/resourcePolicies")]
    assert len(inserts) == 1  # looked before creating
    assert len(fake.policy_users("us-central1", "gpuorch-abc-7-1")) == 2 and gang.tags[TAG_NODE] == "0-of-2"


def test_a_policy_left_by_a_crash_before_node_0_is_swept_after_the_grace(make_provider: Any, fake: FakeGce) -> None:
    provider = make_provider()
    clock = Clock()
    provider._monotonic = clock
    provider._group_create(node_requests(gang_request(gang_offer(provider), nodes=2), 2)[0])
    provider.list_managed()
    clock.t += provider.gang_grace_s - 1
    provider.list_managed()
    assert list(fake.policies) == [("us-central1", "gpuorch-abc-7-1")]
    clock.t += 1
    provider.list_managed()
    assert fake.policies == {}


def test_a_refused_node_deletes_the_others_and_the_policy_goes_once_they_are_gone(
    make_provider: Any, fake: FakeGce
) -> None:
    provider = make_provider()
    fake.refuse("ZONE_RESOURCE_POOL_EXHAUSTED")
    fake.refusals[-1].when = lambda z, body: str(body.get("name", "")).endswith("-n2")
    with pytest.raises(NoCapacityError):
        provider.launch(gang_request(gang_offer(provider)))
    assert [n for (_, n) in fake.instances] == []  # nodes 0 and 1 deleted
    provider.list_managed()
    assert fake.policies == {}

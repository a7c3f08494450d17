"""The gang section of the provider contract: what every adapter with ``max_nodes > 1`` passes.

Each test checks one sentence of ``gpuorch.provider.gang_cloud`` (and ``docs/workloads.md``,
"Multi-node"): a gang of N is one instance to the daemon (node 0's), its nodes share one zone,
type and tags, its placement group is made for the attempt and deleted when the gang ends, the
launch is all or nothing and idempotent, one node's end or notice is the gang's, and every
node's agent gets torchrun's rendezvous environment with node 0's private address.

Subclass ``GangContract`` (name it ``Test...``), provide the ``provider`` fixture and, where
the defaults do not fit, the hooks: ``nodes`` (every node of a gang, from the cloud itself),
``groups`` (the placement groups the cloud holds, as attempt tags; None: the provider has
none), ``refuse_node`` (make one node's launch fail for capacity), ``end_node`` (the cloud ends
one node behind gpuorch's back), ``private_address`` and ``rendezvous`` (skip by default).
Time: ``advance`` as in ``ProviderContract``. Requires pytest; nothing outside tests imports it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import ClassVar, TypeVar

import pytest

from gpuorch.errors import NoCapacityError, NotFoundError, ProviderError
from gpuorch.provider.gang import node_of
from gpuorch.provider.port import TAG_NODE, Instance, InstanceState, LaunchRequest, Offer, Provider, managed_tags
from gpuorch.testing.contract import wait_until

T = TypeVar("T")
Launch = Callable[[LaunchRequest], Instance]


class GangContract:
    """Base class of a multi-node adapter's gang tests. Override fixtures and hooks."""

    size: ClassVar[int] = 2  # nodes per gang in these tests
    end_timeout_s: ClassVar[float] = 30.0
    poll_s: ClassVar[float] = 0.05
    owner: ClassVar[str] = "c0ffee000001"

    # -- fixtures ------------------------------------------------------------------------------
    @pytest.fixture
    def provider(self) -> Provider:
        raise NotImplementedError("a GangContract subclass must provide the `provider` fixture")

    @pytest.fixture
    def offer(self, provider: Provider) -> Offer:
        offers = [o for o in provider.offers() if o.spot_price_per_hour is not None] or provider.offers()
        return min(offers, key=lambda o: o.price_per_hour)

    @pytest.fixture
    def job_id(self) -> int:
        return 10**6 + secrets.randbelow(10**9)

    @pytest.fixture
    def launch(self, provider: Provider) -> Iterator[Launch]:
        launched: list[str] = []

        def _launch(request: LaunchRequest) -> Instance:
            inst = provider.launch(request)
            launched.append(inst.id)
            return inst

        yield _launch
        for instance_id in launched:
            with suppress(ProviderError):
                provider.terminate(instance_id)

    # -- hooks ---------------------------------------------------------------------------------
    def advance(self, provider: Provider, seconds: float) -> None:
        import time

        time.sleep(seconds)

    def nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        """Every node of ``gang`` the cloud holds, any state (default: the ``CloudGangs`` listing)."""
        nodes_of = getattr(provider, "_nodes_of", None)
        if nodes_of is None:
            pytest.skip("provider does not list a gang's nodes")
        return sorted(nodes_of(gang), key=lambda n: node_of(n.tags) or (0, 0))

    def groups(self, provider: Provider) -> list[dict[str, str]] | None:
        """The tags of every placement group the cloud holds; None: the provider makes none."""
        group_list = getattr(provider, "_group_list", None)
        return None if group_list is None else [g.tags for g in group_list()]

    def refuse_node(self, provider: Provider, offer: Offer, rank: int) -> None:
        """Make node ``rank``'s launch fail with NoCapacityError, or skip."""
        pytest.skip("provider cannot refuse one node in tests")

    def end_node(self, provider: Provider, node: Instance) -> None:
        """The cloud ends ``node`` (a reclaim, a crash) without gpuorch asking, or skip."""
        pytest.skip("provider cannot end one node behind gpuorch's back in tests")

    def notice_node(self, provider: Provider, node: Instance, notice_s: float) -> None:
        """Announce a reclaim of ``node`` in ``notice_s`` seconds, or skip."""
        pytest.skip("provider cannot announce a reclaim in tests")

    def private_address(self, provider: Provider, node: Instance) -> str:
        """The node's private address, read from the cloud by the test's own means, or skip."""
        pytest.skip("no private address to compare with")

    # -- helpers -------------------------------------------------------------------------------
    def request(self, offer: Offer, job_id: int, attempt: int = 1, nodes: int | None = None) -> LaunchRequest:
        return LaunchRequest(job_id=job_id, attempt=attempt, offer=offer, spot=offer.spot_price_per_hour is not None,
                             owner=self.owner, nodes=nodes or self.size)

    def wait(self, provider: Provider, check: Callable[[], T | None], what: str) -> T:
        return wait_until(check, timeout_s=self.end_timeout_s, step_s=self.poll_s,
                          advance=lambda s: self.advance(provider, s), what=what)

    def attempt_groups(self, provider: Provider, job_id: int, attempt: int = 1) -> list[dict[str, str]]:
        groups = self.groups(provider)
        if groups is None:
            return []
        want = managed_tags(job_id, attempt, self.owner).items()
        return [g for g in groups if want <= g.items()]

    def live_nodes(self, provider: Provider, gang: Instance) -> list[Instance]:
        try:
            return [n for n in self.nodes(provider, gang) if n.state.alive]
        except NotFoundError:
            return []

    # -- the tests -----------------------------------------------------------------------------
    def test_a_gang_is_one_instance_of_nodes_alike_in_one_group(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        gang = launch(self.request(offer, job_id))
        nodes = self.nodes(provider, gang)
        assert [node_of(n.tags) for n in nodes] == [(k, self.size) for k in range(self.size)]
        assert gang.id == nodes[0].id and gang.tags[TAG_NODE] == f"0-of-{self.size}"
        assert len({n.id for n in nodes}) == self.size
        assert {(n.zone, n.instance_type, n.spot) for n in nodes} == {(offer.zone, offer.instance_type, gang.spot)}
        for n in nodes:
            assert managed_tags(job_id, 1, self.owner).items() <= n.tags.items()
        mine = [i for i in provider.list_managed() if i.job_id == job_id]
        assert [i.id for i in mine] == [gang.id], "the daemon sees one instance per gang"
        assert provider.get(gang.id).id == gang.id
        if self.groups(provider) is not None:
            assert len(self.attempt_groups(provider, job_id)) == 1, "one placement group per attempt, tagged for it"

    def test_a_repeated_launch_returns_the_gang_and_makes_nothing_new(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        first = launch(self.request(offer, job_id))
        again = launch(self.request(offer, job_id))
        assert again.id == first.id
        assert len(self.nodes(provider, first)) == self.size
        if self.groups(provider) is not None:
            assert len(self.attempt_groups(provider, job_id)) == 1

    def test_each_attempt_gets_its_own_gang_and_group(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        a1, a2 = launch(self.request(offer, job_id, 1)), launch(self.request(offer, job_id, 2))
        assert a1.id != a2.id
        assert not {n.id for n in self.nodes(provider, a1)} & {n.id for n in self.nodes(provider, a2)}
        if self.groups(provider) is not None:
            assert len(self.attempt_groups(provider, job_id, 1)) == len(self.attempt_groups(provider, job_id, 2)) == 1

    def test_terminate_ends_every_node_and_deletes_the_group(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        gang = launch(self.request(offer, job_id))
        provider.terminate(gang.id)

        def gone() -> bool:
            provider.list_managed()  # the sweep runs on listings
            return not self.live_nodes(provider, gang) and not self.attempt_groups(provider, job_id)

        self.wait(provider, gone, "every node ended and the group deleted")
        listed = {i.id: i for i in provider.list_managed() if i.job_id == job_id}
        assert all(not i.state.alive for i in listed.values())
        provider.terminate(gang.id)  # quiet the second time

    def test_one_node_refused_leaves_no_node_and_no_group(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        self.refuse_node(provider, offer, self.size)  # the last of size + 1: two or more launched first
        with pytest.raises(NoCapacityError):
            launch(self.request(offer, job_id, nodes=self.size + 1))

        def released() -> bool:
            listed = provider.list_managed()
            alive = [i for i in listed if i.job_id == job_id and i.state.alive]
            return not alive and not self.attempt_groups(provider, job_id)

        self.wait(provider, released, "the refused gang's nodes and group released")

    def test_a_node_that_ends_ends_the_gang(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        gang = launch(self.request(offer, job_id))
        nodes = self.nodes(provider, gang)
        self.end_node(provider, nodes[-1])

        def ended() -> Instance | None:
            got = provider.get(gang.id)
            return got if not got.state.alive else None

        view = self.wait(provider, ended, "the gang to end with its node")
        assert view.id == gang.id
        assert view.state in (InstanceState.TERMINATED, InstanceState.PREEMPTED)
        self.wait(provider, lambda: not self.live_nodes(provider, gang), "the other nodes to end")

    def test_a_notice_on_one_node_is_the_gangs(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        gang = launch(self.request(offer, job_id))
        nodes = self.nodes(provider, gang)
        self.notice_node(provider, nodes[-1], 120.0)
        got = provider.get(gang.id)
        assert got.state.alive and got.preemption_deadline is not None

    def test_every_node_gets_the_rendezvous_with_node_0s_private_address(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        from gpuorch.agent.protocol import AgentConfig

        gang = launch(self.request(offer, job_id))
        nodes = self.nodes(provider, gang)
        master = self.private_address(provider, nodes[0])
        runner = provider.runner(gang)
        node_config = getattr(runner, "node_config", None)
        assert node_config is not None, "a gang's runner starts one agent per node"
        config = AgentConfig(job_id=job_id, attempt=1, job_name="gang", run="true", env={"A": "1"})
        envs = [node_config(config, k).env for k in range(self.size)]
        assert [e["NODE_RANK"] for e in envs] == [str(k) for k in range(self.size)]
        assert {e["MASTER_ADDR"] for e in envs} == {master}
        assert len({e["MASTER_PORT"] for e in envs}) == 1 and all(e["A"] == "1" for e in envs)
        assert [node_config(config, k).upload_checkpoints for k in range(self.size)] == \
            [True] + [False] * (self.size - 1)

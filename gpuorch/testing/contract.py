"""The provider contract suite: the tests every ``Provider`` adapter passes, the fake included.

Each test checks one sentence of a docstring in ``gpuorch.provider.port``. An adapter's test module
subclasses ``ProviderContract`` (the name must start with ``Test`` for pytest to collect it),
provides the ``provider`` fixture, and overrides the hooks for what it can do::

    class TestMyCloudContract(ProviderContract):
        @pytest.fixture
        def provider(self, tmp_path):
            return MyCloudProvider(...)

        def make_unavailable(self, provider, offer, spot):
            ...  # whatever makes this market answer "no capacity"

Time: tests wait through ``advance(provider, seconds)``. Real-time providers keep the default
(sleep); fake-clock providers move their clock instead, so the suite runs in no real time.
Launches carry an owner (``owner``, like a store's installation id); a second one
(``other_owner``) checks that installations sharing an account never get each other's instance.
Features a provider lacks are skipped, never failed: preemption injection is detected through
``SupportsPreemptionInjection``; capacity control and unmanaged instances through hooks.
Requires pytest (a dev dependency); nothing outside tests imports this module.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import datetime, timedelta
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

import pytest

from gpuorch import gpus
from gpuorch.clock import utcnow
from gpuorch.errors import NoCapacityError, NotFoundError, ProviderError
from gpuorch.provider.port import (
    TAG_MANAGED,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    SupportsPreemptionInjection,
    managed_tags,
)

T = TypeVar("T")
Launch = Callable[[LaunchRequest], Instance]


def wait_until(
    check: Callable[[], T | None], *, timeout_s: float = 10.0, step_s: float = 0.05,
    advance: Callable[[float], object] = time.sleep, what: str = "condition",
) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    Between calls, ``advance(step_s)``: a real sleep by default, a fake clock's ``advance`` in
    fake-time tests. Fails the test after ``timeout_s`` of (real or fake) time.
    """
    waited = 0.0
    while True:
        result = check()
        if result:
            return result
        if waited >= timeout_s:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        advance(step_s)
        waited += step_s


@runtime_checkable
class SupportsCapacityControl(Protocol):
    """A knob to make one market run out (FakeProvider, LocalProvider)."""

    def set_capacity(self, zone: str, instance_type: str, spot: bool, available: bool) -> None: ...


class ProviderContract:
    """Base class of every adapter's contract tests. Override fixtures, hooks and flags."""

    # Flags: what the provider under test does not support.
    idempotent_after_terminate: ClassVar[bool] = True  # a terminated instance answers its token
    # Time, in the provider's clock.
    boot_timeout_s: ClassVar[float] = 30.0  # PENDING -> RUNNING
    end_timeout_s: ClassVar[float] = 30.0  # terminate or preemption deadline -> ended
    poll_s: ClassVar[float] = 0.05
    notice_s: ClassVar[float] = 0.5  # preemption notice used by the tests
    # Billed times: how far the provider's clock and resolution may put a time outside the call
    # that caused it (EC2 dates a termination to the second), and how long a look is held back
    # to show that an end is dated when it happened, not when it was seen.
    clock_skew_s: ClassVar[float] = 1.0
    late_look_s: ClassVar[float] = 2.0
    # An id in the provider's format that no instance has.
    missing_instance_id: ClassVar[str] = "i-0123456789abcdef0"
    # The installation the tests launch for (like a store's installation id), and another one.
    owner: ClassVar[str] = "c0ffee000001"
    other_owner: ClassVar[str] = "c0ffee000002"

    # -- fixtures a subclass provides ------------------------------------------------------
    @pytest.fixture
    def provider(self) -> Provider:
        raise NotImplementedError("a ProviderContract subclass must provide the `provider` fixture")

    @pytest.fixture
    def offer(self, provider: Provider) -> Offer:
        """An offer the tests launch: by default the cheapest one that has a spot market."""
        offers = [o for o in provider.offers() if o.spot_price_per_hour is not None] or provider.offers()
        return min(offers, key=lambda o: o.price_per_hour)

    @pytest.fixture
    def job_id(self) -> int:
        # Random, so a provider backed by something persistent never sees an old test's token.
        return 10**6 + secrets.randbelow(10**9)

    @pytest.fixture
    def launch(self, provider: Provider) -> Iterator[Launch]:
        """``provider.launch`` that terminates what the test launched when it ends."""
        launched: list[str] = []

        def _launch(request: LaunchRequest) -> Instance:
            inst = provider.launch(request)
            launched.append(inst.id)
            return inst

        yield _launch
        for instance_id in launched:
            with suppress(ProviderError):
                provider.terminate(instance_id)

    # -- hooks a subclass may override -----------------------------------------------------
    def advance(self, provider: Provider, seconds: float) -> None:
        """Let ``seconds`` pass for the provider. Fake clocks override this."""
        time.sleep(seconds)

    def now(self, provider: Provider) -> datetime:
        """The provider's current time (fake clocks override this with their clock)."""
        return utcnow()

    def make_unavailable(self, provider: Provider, offer: Offer, spot: bool) -> None:
        """Make launches into this market fail with NoCapacityError, or skip the test."""
        if not isinstance(provider, SupportsCapacityControl):
            pytest.skip("provider has no capacity control")
        provider.set_capacity(offer.zone, offer.instance_type, spot, available=False)

    def create_unmanaged(self, provider: Provider, offer: Offer) -> str:
        """Create an instance without gpuorch's tags (somebody else's VM); return its id."""
        pytest.skip("provider cannot create an unmanaged instance in tests")

    def inject_preemption(self, provider: Provider, instance_id: str, notice_s: float) -> None:
        if not isinstance(provider, SupportsPreemptionInjection):
            pytest.skip("provider does not support preemption injection")
        provider.inject_preemption(instance_id, notice_s)

    # -- helpers ---------------------------------------------------------------------------
    def request(self, offer: Offer, job_id: int, attempt: int = 1, spot: bool | None = None,
                owner: str | None = None) -> LaunchRequest:
        spot = offer.spot_price_per_hour is not None if spot is None else spot
        return LaunchRequest(job_id=job_id, attempt=attempt, offer=offer, spot=spot,
                             owner=self.owner if owner is None else owner)

    def wait(self, provider: Provider, check: Callable[[], T | None], timeout_s: float, what: str) -> T:
        return wait_until(check, timeout_s=timeout_s, step_s=self.poll_s,
                          advance=lambda s: self.advance(provider, s), what=what)

    def wait_running(self, provider: Provider, instance_id: str) -> Instance:
        def running() -> Instance | None:
            inst = provider.get(instance_id)
            assert inst.state in (InstanceState.PENDING, InstanceState.RUNNING), inst.state
            return inst if inst.state == InstanceState.RUNNING else None

        return self.wait(provider, running, self.boot_timeout_s, f"{instance_id} to run")

    def ended(self, provider: Provider, instance_id: str) -> Instance | None:
        """The instance if it has ended, a placeholder if the provider already forgot it."""
        try:
            inst = provider.get(instance_id)
        except NotFoundError:
            return _GONE
        return None if inst.state.alive else inst

    # -- offers ----------------------------------------------------------------------------
    def test_offers_are_the_providers_own_and_well_formed(self, provider: Provider) -> None:
        offers = provider.offers()
        assert offers, "a provider sells at least one offer"
        assert {o.provider for o in offers} == {provider.name}
        keys = [(o.zone, o.instance_type) for o in offers]
        assert len(keys) == len(set(keys)), "one offer per (zone, instance type)"
        # Owned capacity (``Capabilities.owned_capacity``) may be priced 0; a cloud sells at a price.
        floor_ok = (lambda p: p >= 0) if provider.capabilities.owned_capacity else (lambda p: p > 0)
        for o in offers:
            assert o.region and o.zone and o.instance_type
            assert math.isfinite(o.price_per_hour) and floor_ok(o.price_per_hour), o.price_per_hour
            assert o.spot_price_per_hour is None or (
                math.isfinite(o.spot_price_per_hour) and floor_ok(o.spot_price_per_hour)), o.spot_price_per_hour
            assert o.billing_granularity_s >= 1 and o.min_billing_s >= 0
            if o.gpu is None:
                assert o.gpu_count == 0
            else:
                spec = gpus.lookup(o.gpu)
                assert spec is not None and spec.name == o.gpu, f"{o.gpu!r} is not a canonical gpuorch.gpus name"
                assert o.gpu_count >= 1 and o.gpu_memory_gib > 0

    # -- launch ----------------------------------------------------------------------------
    def test_launch_returns_an_instance_tagged_for_its_attempt(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        req = self.request(offer, job_id, attempt=3)
        inst = launch(req)
        assert inst.id and inst.provider == provider.name
        assert (inst.region, inst.zone, inst.instance_type) == (offer.region, offer.zone, offer.instance_type)
        assert inst.spot == req.spot
        assert inst.state.alive
        assert managed_tags(job_id, 3, self.owner).items() <= inst.tags.items()
        assert (inst.job_id, inst.attempt, inst.owner) == (job_id, 3, self.owner)

    def test_launch_is_idempotent_by_client_token(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        first = launch(self.request(offer, job_id))
        second = launch(self.request(offer, job_id))
        assert second.id == first.id
        mine = [i for i in provider.list_managed() if i.job_id == job_id]
        assert [i.id for i in mine] == [first.id]

    def test_each_installation_gets_its_own_instance_for_the_same_attempt(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        """Job and attempt numbers repeat across installations sharing an account (each database
        counts from 1): the owner is part of the token, and each gets, and finds again, its own."""
        mine = launch(self.request(offer, job_id))
        theirs = launch(self.request(offer, job_id, owner=self.other_owner))
        assert mine.id != theirs.id
        assert (mine.owner, theirs.owner) == (self.owner, self.other_owner)
        assert launch(self.request(offer, job_id, owner=self.other_owner)).id == theirs.id
        assert launch(self.request(offer, job_id)).id == mine.id
        listed = {i.id: i.owner for i in provider.list_managed() if i.job_id == job_id}
        assert listed == {mine.id: self.owner, theirs.id: self.other_owner}
        assert provider.get(theirs.id).owner == self.other_owner

    def test_each_attempt_gets_its_own_instance(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        a1 = launch(self.request(offer, job_id, attempt=1))
        a2 = launch(self.request(offer, job_id, attempt=2))
        assert a1.id != a2.id
        assert {i.id for i in provider.list_managed() if i.job_id == job_id} == {a1.id, a2.id}

    def test_launch_after_terminate_returns_the_same_instance(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        if not self.idempotent_after_terminate:
            pytest.skip("provider forgets client tokens of terminated instances")
        first = launch(self.request(offer, job_id))
        provider.terminate(first.id)
        self.wait(provider, lambda: self.ended(provider, first.id), self.end_timeout_s, "termination")
        again = launch(self.request(offer, job_id))
        assert again.id == first.id and not again.state.alive

    def test_instance_boots_to_running(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        inst = launch(self.request(offer, job_id))
        running = self.wait_running(provider, inst.id)
        assert running.id == inst.id

    # -- get and list ----------------------------------------------------------------------
    def test_get_returns_the_launched_instance(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        inst = launch(self.request(offer, job_id))
        got = provider.get(inst.id)
        assert (got.id, got.zone, got.instance_type, got.spot) == (inst.id, inst.zone, inst.instance_type, inst.spot)
        assert managed_tags(job_id, 1, self.owner).items() <= got.tags.items()

    def test_get_of_an_unknown_id_raises_not_found(self, provider: Provider) -> None:
        with pytest.raises(NotFoundError):
            provider.get(self.missing_instance_id)

    def test_list_managed_lists_every_managed_instance(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        inst = launch(self.request(offer, job_id))
        listed = provider.list_managed()
        assert inst.id in {i.id for i in listed}
        assert all(i.tags.get(TAG_MANAGED) == "true" and i.provider == provider.name for i in listed)

    def test_list_managed_leaves_out_unmanaged_instances(self, provider: Provider, offer: Offer) -> None:
        foreign = self.create_unmanaged(provider, offer)
        assert foreign not in {i.id for i in provider.list_managed()}

    # -- terminate -------------------------------------------------------------------------
    def test_terminate_ends_the_instance_and_is_quiet_the_second_time(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        inst = launch(self.request(offer, job_id))
        provider.terminate(inst.id)
        ended = self.wait(provider, lambda: self.ended(provider, inst.id), self.end_timeout_s, "termination")
        assert ended is _GONE or ended.state == InstanceState.TERMINATED
        provider.terminate(inst.id)
        listed = {i.id: i for i in provider.list_managed()}
        assert inst.id not in listed or not listed[inst.id].state.alive

    def test_terminate_of_an_unknown_id_is_quiet(self, provider: Provider) -> None:
        provider.terminate(self.missing_instance_id)

    # -- capacity --------------------------------------------------------------------------
    def test_no_capacity_raises_no_capacity_error_and_creates_nothing(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        spot = offer.spot_price_per_hour is not None
        self.make_unavailable(provider, offer, spot)
        with pytest.raises(NoCapacityError):
            launch(self.request(offer, job_id, spot=spot))
        assert not [i for i in provider.list_managed() if i.job_id == job_id]

    # -- preemption ------------------------------------------------------------------------
    def test_preempted_instance_carries_its_deadline_then_reads_preempted(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        inst = launch(self.request(offer, job_id))
        self.wait_running(provider, inst.id)
        before = self.now(provider)
        self.inject_preemption(provider, inst.id, self.notice_s)
        noticed = provider.get(inst.id)
        assert noticed.state.alive, "the instance lives until its deadline"
        assert noticed.preemption_deadline is not None
        # About notice_s from the injection (a real clock moved a little meanwhile).
        assert before < noticed.preemption_deadline <= before + timedelta(seconds=self.notice_s + 5)
        self.advance(provider, self.notice_s)
        gone = self.wait(provider, lambda: self.ended(provider, inst.id), self.end_timeout_s, "the preemption")
        assert gone is _GONE or gone.state == InstanceState.PREEMPTED
        provider.terminate(inst.id)  # the daemon's cleanup of a reclaimed instance is quiet too

    # -- billed times (Instance: created_at, ended_at) ----------------------------------------
    def test_launch_time_lies_within_the_launch_call_and_a_live_instance_has_no_end(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        skew = timedelta(seconds=self.clock_skew_s)
        before = self.now(provider)
        inst = launch(self.request(offer, job_id))
        after = self.now(provider)
        for seen in (inst, provider.get(inst.id), *(i for i in provider.list_managed() if i.id == inst.id)):
            assert seen.created_at is None or before - skew <= seen.created_at <= after + skew, seen.created_at
            assert seen.ended_at is None, "ended_at is set only once the instance is no longer alive"

    def test_a_termination_is_dated_between_the_call_and_the_look(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        skew = timedelta(seconds=self.clock_skew_s)
        inst = launch(self.request(offer, job_id))
        self.wait_running(provider, inst.id)
        before = self.now(provider)
        provider.terminate(inst.id)
        first = self.wait(provider, lambda: self.ended(provider, inst.id), self.end_timeout_s, "termination")
        seen_at = self.now(provider)
        self.advance(provider, self.late_look_s)
        for gone in (first, self.ended(provider, inst.id)):
            if gone is None or gone is _GONE or gone.ended_at is None:
                continue
            assert before - skew <= gone.ended_at <= seen_at + skew, (gone.ended_at, before, seen_at)
            assert gone.created_at is None or gone.ended_at >= gone.created_at - skew

    def test_a_reclaim_is_dated_at_its_deadline_not_at_a_late_look(
        self, provider: Provider, offer: Offer, job_id: int, launch: Launch
    ) -> None:
        skew = timedelta(seconds=self.clock_skew_s)
        inst = launch(self.request(offer, job_id))
        self.wait_running(provider, inst.id)
        self.inject_preemption(provider, inst.id, self.notice_s)
        deadline = provider.get(inst.id).preemption_deadline
        self.advance(provider, self.notice_s + self.late_look_s)  # nobody looks until well after it
        gone = self.wait(provider, lambda: self.ended(provider, inst.id), self.end_timeout_s, "the preemption")
        if gone is not _GONE and gone.ended_at is not None:
            assert deadline is not None, "a reclaim with an end time announced its deadline"
            assert deadline - skew <= gone.ended_at <= deadline + skew, (gone.ended_at, deadline)
        provider.terminate(inst.id)


# Stands for "the provider no longer knows the instance", which ends it as surely as a state.
_GONE = Instance(id="(gone)", provider="", region="", zone="", instance_type="", spot=False,
                 state=InstanceState.TERMINATED)

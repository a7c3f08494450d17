"""Every wrapper around the provider port forwards every capability the port declares, for every
shipped provider (DESIGN.md 4: "a wrapper forwards every capability that the port declares"), and
every shipped adapter declares its capabilities as the one ``Capabilities`` value (issue 32)."""

from __future__ import annotations

from dataclasses import fields

import pytest
from prometheus_client import CollectorRegistry, Counter

from gpuorch.metrics.instrument import InstrumentedProvider
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import Provider
from gpuorch.registry import available, provider_class
from gpuorch.runners.port import Runner
from gpuorch.testing import wrappers
from gpuorch.testing.fake_provider import FakeProvider


def _instrumented(inner: Provider) -> Provider:
    r = CollectorRegistry()
    return InstrumentedProvider(inner, Counter("c", "c", ["provider", "method"], registry=r),
                                Counter("e", "e", ["provider", "method", "kind", "code"], registry=r))


WRAPPERS = {"metrics": _instrumented}  # every shipped wrapper: a new one is added here and to the check below


def test_every_shipped_wrapper_is_listed():
    shipped = {cls for cls in _subclasses(Provider) if cls.__module__.startswith("gpuorch.")
               and not cls.__module__.startswith("gpuorch.testing")
               and isinstance(getattr(cls, "inner", None), property)}
    listed = {type(make(wrappers.bare_instance(provider_class("local")))) for make in WRAPPERS.values()}
    assert shipped <= listed, f"wrappers not checked by this test: {shipped - listed}"


def test_the_port_declares_its_capabilities_as_one_value():
    assert wrappers.undeclared_attributes() == set(), "declare them as fields of Capabilities"
    assert wrappers.declared_attributes() == tuple(f.name for f in fields(Capabilities))
    assert {"max_nodes", "runs_containers", "owned_capacity", "runners_may_block", "agent_statuses",
            "volume_attach_check", "disk_types", "registry_login"} <= set(wrappers.declared_attributes())
    assert wrappers.protocol_capabilities(), "the port's Protocol capabilities were not found"


@pytest.mark.parametrize("name", available())
def test_every_shipped_provider_declares_exactly_the_optional_methods_it_has(name):
    """A flag without its method would make the core call the port's default; a method without
    its flag is never called; a retired class attribute (``max_nodes = 8``) declares nothing."""
    assert wrappers.declaration_mismatches(provider_class(name)) == []


def test_every_shipped_runner_declares_exactly_the_optional_methods_it_has():
    runners = [cls for cls in _subclasses(Runner) if not cls.__module__.startswith("gpuorch.testing")]
    assert any(cls.capabilities.listed_heartbeat for cls in runners), "the local runner's listed heartbeat"
    assert [line for cls in runners for line in wrappers.declaration_mismatches(cls)] == []


def test_a_retired_flag_or_a_flag_without_its_method_is_caught():
    class Stale(FakeProvider):
        max_nodes = 8  # the old way: the core reads capabilities only
        capabilities = Capabilities(agent_statuses=True)  # but no agent_statuses of its own

        @classmethod
        def volume_types(cls, options):  # type: ignore[no-untyped-def]
            return ("ssd",)  # but disk_types is not declared: submit would never ask

    assert sorted(line.split(":")[0] for line in wrappers.declaration_mismatches(Stale)) == [
        "Stale", "Stale", "Stale.max_nodes"]
    assert any("disk_types is False" in line for line in wrappers.declaration_mismatches(Stale))


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name", available())
def test_wrapper_forwards_every_declared_capability(name, wrapper):
    adapter = wrappers.bare_instance(provider_class(name))
    wrapped = WRAPPERS[wrapper](adapter)
    assert wrappers.capability_mismatches(adapter, wrapped) == []
    assert wrapped.capabilities == adapter.capabilities  # one value, every field of it


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_wrapper_that_drops_a_field_or_a_flagged_method_is_caught(wrapper):
    every = Capabilities(**{f.name: (2 if f.type == "int" else "x" if f.type == "str" else True)
                            for f in fields(Capabilities)})

    class Everything(FakeProvider):
        capabilities = every

        def agent_statuses(self, instances):  # type: ignore[no-untyped-def]
            return {}

        def can_attach_volume(self, instance_type, disk_type=None):  # type: ignore[no-untyped-def]
            return False

        def registry_login(self, registry):  # type: ignore[no-untyped-def]
            return None

    adapter = Everything()
    assert wrappers.capability_mismatches(adapter, WRAPPERS[wrapper](adapter)) == []
    bare = FakeProvider()
    missing = wrappers.capability_mismatches(adapter, bare)
    assert {line.split(":")[0] for line in missing} == {*wrappers.declared_attributes(), "agent_statuses",
                                                        "can_attach_volume", "registry_login"} - {
        f.name for f in fields(Capabilities) if getattr(every, f.name) == getattr(bare.capabilities, f.name)}


def test_a_gang_adapter_keeps_its_node_limit_and_containers_through_the_metrics_wrapper():
    local = wrappers.bare_instance(provider_class("local"))
    assert local.capabilities.max_nodes > 1 and local.capabilities.runs_containers  # the defect: 8 became 1
    wrapped = _instrumented(local)
    assert (wrapped.capabilities.max_nodes, wrapped.capabilities.runs_containers) == (
        local.capabilities.max_nodes, True)


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out

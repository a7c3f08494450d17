"""Every wrapper around the provider port forwards every capability the port declares, for every
shipped provider (DESIGN.md 4: "a wrapper forwards every capability that the port declares")."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter

from gpuorch.metrics.instrument import InstrumentedProvider
from gpuorch.provider.port import Provider
from gpuorch.registry import available, provider_class
from gpuorch.testing import wrappers


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


def test_the_port_lists_every_capability_it_declares():
    assert wrappers.undeclared_attributes() == set(), "add them to Provider.DECLARED_CAPABILITIES"
    assert wrappers.protocol_capabilities(), "the port's Protocol capabilities were not found"


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name", available())
def test_wrapper_forwards_every_declared_capability(name, wrapper):
    adapter = wrappers.bare_instance(provider_class(name))
    wrapped = WRAPPERS[wrapper](adapter)
    assert wrappers.capability_mismatches(adapter, wrapped) == []


def test_a_gang_adapter_keeps_its_node_limit_and_containers_through_the_metrics_wrapper():
    local = wrappers.bare_instance(provider_class("local"))
    assert local.max_nodes > 1 and local.runs_containers  # what the defect lost: 8 became 1
    wrapped = _instrumented(local)
    assert (wrapped.max_nodes, wrapped.runs_containers) == (local.max_nodes, True)


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out

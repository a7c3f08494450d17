"""Count every call the daemon makes to a provider, at one place: a wrapper around each Provider.

The wrapper is a Provider itself and forwards everything else: the adapter's declared
``capabilities`` as the one value they are, each optional port method they name, and the
Protocol capabilities (so the core's ``isinstance(p, SupportsVolumes)`` checks still see what
the adapter offers). Errors are
counted by provider, method, kind (the domain error class) and the adapter's error code, then
re-raised unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import Counter

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    ProviderError,
    QuotaError,
    TransientError,
)
from gpuorch.provider.port import Instance, LaunchRequest, Offer, Provider
from gpuorch.runners.port import Runner

if TYPE_CHECKING:
    from gpuorch.agent.container import RegistryLogin
    from gpuorch.agent.protocol import AgentStatus

T = TypeVar("T")

# Most specific first: AuthError is a PermanentError.
_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (NoCapacityError, "no_capacity"), (QuotaError, "quota"), (TransientError, "transient"), (AuthError, "auth"),
    (PermanentError, "permanent"), (NotFoundError, "not_found"), (ProviderError, "provider"),
)


def error_kind(e: BaseException) -> str:
    """The label for an error: the domain class, or ``unexpected`` for anything an adapter
    failed to translate (a bug worth an alert)."""
    return next((kind for cls, kind in _KINDS if isinstance(e, cls)), "unexpected")


def error_code(e: BaseException) -> str:
    code = getattr(e, "code", None) if isinstance(e, ProviderError) else type(e).__name__
    return str(code) if code else "none"


class InstrumentedProvider(Provider):
    """``inner`` with its calls counted in ``calls`` and ``errors`` (labels documented above)."""

    def __init__(self, inner: Provider, calls: Counter, errors: Counter) -> None:
        self._inner, self._calls, self._errors = inner, calls, errors
        self.name = inner.name
        # One value, a class attribute of the port: __getattr__ would never see the adapter's.
        self.capabilities = inner.capabilities

    def _call(self, method: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._calls.labels(self.name, method).inc()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            self._errors.labels(self.name, method, error_kind(e), error_code(e)).inc()
            raise

    def offers(self) -> list[Offer]:
        return self._call("offers", self._inner.offers)

    def launch(self, request: LaunchRequest) -> Instance:
        return self._call("launch", self._inner.launch, request)

    def get(self, instance_id: str) -> Instance:
        return self._call("get", self._inner.get, instance_id)

    def list_managed(self) -> list[Instance]:
        return self._call("list_managed", self._inner.list_managed)

    def terminate(self, instance_id: str) -> None:
        return self._call("terminate", self._inner.terminate, instance_id)

    def runner(self, instance: Instance) -> Runner:
        return self._inner.runner(instance)

    # The port's optional methods (each behind a declared capability) are the port's own defaults
    # here unless forwarded: __getattr__ never sees a method the base class has.
    def agent_statuses(self, instances: Sequence[Instance]) -> Mapping[str, tuple[Runner, AgentStatus | None] | None]:
        return self._call("agent_statuses", self._inner.agent_statuses, instances)

    def can_attach_volume(self, instance_type: str, disk_type: str | None = None) -> bool:
        return self._inner.can_attach_volume(instance_type, disk_type)  # pure: no cloud call to count

    def registry_login(self, registry: str) -> RegistryLogin | None:
        return self._inner.registry_login(registry)  # pure: no cloud call to count

    def close(self) -> None:
        self._inner.close()

    @property
    def inner(self) -> Provider:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        """Capabilities and anything else the adapter has; public methods are counted too."""
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(name, attr, *args, **kwargs)

"""Fault injection: a seeded share of a provider's port calls fails the way clouds fail.

The FakeProvider and the sim provider take a ``FaultPlan``; the reconciler must get every job
done through it. Each kind raises the domain error an adapter translates the cloud's answer to:

========  ==============================================  ===========================
kind      what the cloud did                               error
========  ==============================================  ===========================
throttle  rejected the call (RequestLimitExceeded, 429)    TransientError
server    failed inside (InternalError, 500/503)           TransientError
timeout   did not answer in time; on ``launch`` and        TransientError
          ``terminate`` the call took effect half the
          time, and only the answer was lost
capacity  InsufficientInstanceCapacity (launch only)       NoCapacityError
quota     an account limit (launch only)                   QuotaError
========  ==============================================  ===========================

Only the port's calls fail (``offers``, ``launch``, ``get``, ``list_managed``, ``terminate``),
never the runner's. Each injected fault is counted in ``injected`` and logged at DEBUG.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuorch.errors import NoCapacityError, ProviderError, QuotaError, TransientError

log = logging.getLogger("gpuorch.faults")

T = TypeVar("T")
KINDS = ("throttle", "server", "timeout", "capacity", "quota")
METHODS = ("offers", "launch", "get", "list_managed", "terminate")
_LAUNCH_ONLY = frozenset({"capacity", "quota"})
_TAKES_EFFECT = frozenset({"launch", "terminate"})  # a timeout may hide a call that happened


@dataclass
class FaultPlan:
    """Fail ``rate`` of the calls to ``methods`` with one of ``kinds``, drawn from ``seed``."""

    rate: float = 0.0
    seed: int = 0
    kinds: tuple[str, ...] = KINDS
    methods: tuple[str, ...] = METHODS
    injected: Counter[tuple[str, str]] = field(default_factory=Counter)  # (method, kind) -> count

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"faults.rate: {self.rate} is not a fraction; give a number from 0 to 1")
        bad = sorted(set(self.kinds) - set(KINDS)) or sorted(set(self.methods) - set(METHODS))
        if bad:
            raise ValueError(f"faults: unknown {bad[0]!r}; kinds are {', '.join(KINDS)}, methods {', '.join(METHODS)}")
        self.kinds, self.methods = tuple(self.kinds), tuple(self.methods)
        self._rng = random.Random(self.seed)

    @classmethod
    def from_options(cls, options: dict[str, Any] | None, seed_salt: int = 0) -> FaultPlan | None:
        """``{rate: 0.2, seed: 7, kinds: [...], methods: [...]}`` from a config; None when empty."""
        if not options:
            return None
        opts = dict(options)
        opts["seed"] = int(opts.get("seed", 0)) ^ seed_salt
        for key in ("kinds", "methods"):
            if key in opts:
                opts[key] = tuple(_strings(opts[key]))
        unknown = set(opts) - {"rate", "seed", "kinds", "methods"}
        if unknown:
            raise ValueError(f"faults.{sorted(unknown)[0]}: unknown option; known: rate, seed, kinds, methods")
        return cls(**opts)

    def draw(self, method: str) -> str | None:
        """The kind of fault this call of ``method`` gets, or None for a call that goes through."""
        if self.rate <= 0 or method not in self.methods:
            return None
        kinds = [k for k in self.kinds if method == "launch" or k not in _LAUNCH_ONLY]
        if not kinds or self._rng.random() >= self.rate:
            return None
        kind = self._rng.choice(kinds)
        self.injected[(method, kind)] += 1
        return kind

    def call(self, method: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, unless this call draws a fault: then raise it, before the call or, for a
        timeout on a call that takes effect, half the time after it."""
        kind = self.draw(method)
        if kind is None:
            return fn(*args)
        if kind == "timeout" and method in _TAKES_EFFECT and self._rng.random() < 0.5:
            fn(*args)
            log.debug("injected %s after %s took effect", kind, method)
        else:
            log.debug("injected %s into %s", kind, method)
        raise fault_error(kind, method)

    @property
    def total(self) -> int:
        return sum(self.injected.values())


def fault_error(kind: str, method: str) -> ProviderError:
    what = f"injected fault in {method}"
    if kind == "throttle":
        return TransientError(f"{what}: request rate exceeded", code="RequestLimitExceeded", retry_after=1.0)
    if kind == "server":
        return TransientError(f"{what}: internal error", code="InternalError", retry_after=1.0)
    if kind == "timeout":
        return TransientError(f"{what}: no answer in time", code="RequestTimeout", retry_after=1.0)
    if kind == "capacity":
        return NoCapacityError(f"{what}: insufficient capacity", code="InsufficientInstanceCapacity")
    return QuotaError(f"{what}: vCPU quota exceeded", code="VcpuLimitExceeded")


def _strings(value: Iterable[str] | str) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]

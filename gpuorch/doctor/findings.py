"""What a doctor check reports. Kept dependency-free: provider adapters import it for their
``doctor()`` capability (``gpuorch.provider.port.SupportsDoctor``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Finding:
    """One result. ``fail``: gpuorch will not work as configured (``gpuorch doctor`` exits 1);
    ``warn``: worth a look; ``ok``: checked and fine. ``fix`` is one line a person can act on.

    Messages never carry secrets: no keys, tokens or passwords, not even in part.
    """

    check: str
    status: Status
    message: str
    fix: str | None = None

    @classmethod
    def ok(cls, check: str, message: str) -> Finding:
        return cls(check, "ok", message)

    @classmethod
    def warn(cls, check: str, message: str, fix: str | None = None) -> Finding:
        return cls(check, "warn", message, fix)

    @classmethod
    def fail(cls, check: str, message: str, fix: str) -> Finding:
        return cls(check, "fail", message, fix)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

"""The ``sim`` provider: a simulated multi-region spot market replaying real traces, whose
instances run the real agent and job as local processes. See docs/recovery.md."""

from .provider import SimProvider

__all__ = ["SimProvider"]

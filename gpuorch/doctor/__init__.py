"""``gpuorch doctor``: a list of small checks, each returning findings with a one-line fix.

A check is a function ``(ctx: Context) -> Iterable[Finding]``. Checks run in order and may
leave things in the context for later ones (the configuration, the loaded providers); a check
that needs something an earlier one could not provide reports nothing. A check that raises is
reported as a failure of that check, never as a crash of the doctor. Provider-specific checks
(credentials through the SDK's standard chain, quotas, ...) live in the adapters, behind the
optional ``doctor()`` capability (``gpuorch.provider.port.SupportsDoctor``).
"""

from __future__ import annotations

from gpuorch.doctor.checks import Check, Context, Finding, Status, default_checks, failed, run, summary

__all__ = ["Check", "Context", "Finding", "Status", "default_checks", "failed", "run", "summary"]

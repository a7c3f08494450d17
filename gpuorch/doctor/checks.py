"""The doctor's run: its default checks in order, each check's findings, and the summary line
(``gpuorch.doctor`` re-exports them; this module has its own layer, above the checks it runs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuorch.doctor.context import Check, Context
from gpuorch.doctor.findings import Finding, Status

__all__ = ["Check", "Context", "Finding", "Status", "default_checks", "failed", "run", "summary"]


def default_checks() -> list[Check]:
    from gpuorch.doctor.daemon import check_daemon
    from gpuorch.doctor.host import check_metrics_port, check_ssh_keys
    from gpuorch.doctor.providers import check_credentials, check_providers
    from gpuorch.doctor.state import (
        check_config,
        check_database,
        check_file_modes,
        check_object_stores,
        check_quarantine,
    )
    from gpuorch.notify.doctor import check_notifications

    return [check_config, check_database, check_daemon, check_providers, check_credentials, check_object_stores,
            check_quarantine, check_file_modes, check_ssh_keys, check_metrics_port, check_notifications]


def run(config_path: Path | None = None, checks: Sequence[Check] | None = None) -> list[Finding]:
    """Every check's findings, in order."""
    ctx = Context(config_path=config_path)
    findings: list[Finding] = []
    try:
        for check in checks if checks is not None else default_checks():
            name = check.__name__.removeprefix("check_").replace("_", " ")
            try:
                findings.extend(check(ctx))
            except Exception as e:  # one broken check must not hide the others
                findings.append(Finding.fail(name, f"the check itself failed: {type(e).__name__}: {e}",
                                             "report it as a gpuorch bug, with `gpuorch doctor --json`"))
    finally:
        ctx.close()
    return findings


def failed(findings: Iterable[Finding]) -> bool:
    return any(f.status == "fail" for f in findings)


def summary(findings: Iterable[Finding]) -> str:
    """The doctor's last line: ``2 problems, 1 warning found``; ``no problems found`` only when
    nothing failed and nothing warned (a warning is worth a look, so it is never hidden)."""
    found = list(findings)
    parts = [f"{n} {word}{'' if n == 1 else 's'}" for word, status in (("problem", "fail"), ("warning", "warn"))
             if (n := sum(f.status == status for f in found))]
    return ", ".join(parts) + " found" if parts else "no problems found"


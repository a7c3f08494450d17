"""The shape of an adapter's ``doctor()`` self-check (``SupportsDoctor``): where the SDK's
standard chain found credentials, then one cheap call per permission the adapter needs.

A probe is ``(permission, call)``. ``call`` returns normally when the permission is granted,
or raises a ``gpuorch.errors`` error (the adapter's translation): ``AuthError`` is a refused
permission (fail), any other ``ProviderError`` means it could not be checked (warn).
Findings name the permission and the error's code only, never the SDK's message: no key,
token or account secret is ever printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from gpuorch.doctor.findings import Finding
from gpuorch.errors import AuthError, ProviderError

Probe = tuple[str, Callable[[], object]]


def permission_findings(check: str, credentials: str, probes: Iterable[Probe], fix: str) -> list[Finding]:
    """Run ``probes`` in order; ``credentials`` says where the chain found them (a kind, never a
    value). One finding per refused or unchecked permission, or one ``ok`` listing them all."""
    out: list[Finding] = []
    granted: list[str] = []
    for permission, call in probes:
        try:
            call()
        except AuthError as e:
            out.append(Finding.fail(check, f"credentials from {credentials}: {permission} refused ({_code(e)})", fix))
        except ProviderError as e:
            out.append(Finding.warn(check, f"{permission} could not be checked: {type(e).__name__} ({_code(e)})",
                                    "check the network path to the cloud's API, then run `gpuorch doctor` again"))
        else:
            granted.append(permission)
    if not out:
        out.append(Finding.ok(check, f"credentials from {credentials}; granted: {', '.join(dict.fromkeys(granted))}"))
    return out


def _code(e: ProviderError) -> str:
    return e.code or "no code"


def state_dir_finding(check: str, directory: Path, home: Path) -> Finding | None:
    """A failing finding if the daemon cannot write in ``directory`` (a provider whose instances
    are files under ``home``: local, sim); None if it can."""
    probe = directory / ".doctor-probe"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return Finding.fail(check, f"cannot write in {directory}: {e.strerror}",
                            f"chown -R gpuorch {home} (the daemon's user)")
    return None

"""The domain error tree.

Adapters translate their SDK's exceptions into these at the boundary; the core never sees
botocore, google-api-core or azure-core exceptions. The reconciler decides by class:

- ``NoCapacityError``: try the next offer; back that (region, instance type) off a while.
- ``QuotaError``: like no capacity, but the back-off is longer (a human must raise a quota).
- ``TransientError``: retry the same call later (throttling, 5xx, timeouts).
- ``PermanentError``: do not retry this request (bad image, auth, invalid parameters).
- ``NotFoundError``: the resource does not exist (anymore).

Runners translate theirs the same way: ``RunnerUnavailable`` (``gpuorch.runners.port``) is a
runner's "not yet" (SSH not up, the instance still booting), retried on a later pass until the
boot timeout; a ``PermanentError`` from ``Runner.start`` (a workdir that cannot be copied: code
``InvalidWorkdir``) ends the attempt as failed at once, with its message as the cause, and its
instance is terminated (``reconciler.attempt_steps.start_failed``). ``AuthError`` is the one
permanent error a runner's start keeps retrying: a person can mend credentials meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable


class GpuorchError(Exception):
    """Base of every error gpuorch raises on purpose."""


class UserInputError(GpuorchError):
    """Bad input from a user: the message names the field and the fix (CLI exit code 2)."""


class UnknownJob(UserInputError):
    """No job has that id or name (the HTTP API answers 404)."""

    @classmethod
    def ref(cls, ref: str) -> UnknownJob:
        return cls(f"job: no job {ref!r}; see `gpuorch status` for ids and names")


class UnknownSweep(UserInputError):
    """No sweep has that id or name (the HTTP API answers 404)."""

    @classmethod
    def ref(cls, ref: str) -> UnknownSweep:
        return cls(f"sweep: no sweep {ref!r}; check the name given to `gpuorch sweep submit`")


class Refused(UserInputError):
    """Well-formed, but not allowed: a budget or an authentication says no (CLI exit code 4)."""


class ProviderError(GpuorchError):
    """Base of errors raised by provider adapters."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class NoCapacityError(ProviderError):
    """The offer has no capacity right now (spot or on-demand)."""


class QuotaError(ProviderError):
    """An account limit prevents the request (vCPU quota, spot instance count)."""


class TransientError(ProviderError):
    """Worth retrying the same request after ``retry_after`` seconds."""

    def __init__(self, message: str, *, code: str | None = None, retry_after: float = 5.0) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class PermanentError(ProviderError):
    """Retrying the same request will not help."""


class AuthError(PermanentError):
    """Credentials are missing, expired or lack a permission."""


class NotFoundError(ProviderError):
    """The resource does not exist."""


def runtime_line(e: BaseException) -> str:
    """One line for an error no check foresaw: a full disk, an unwritable or unreachable
    database, or a gpuorch bug (GPUORCH_DEBUG=1 shows the traceback)."""
    import errno

    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" {e.filename}" if e.filename else ""
        return f"disk full: cannot write{where}; free space on that file system and retry"
    text = " ".join(str(e).split())[:300]
    if "database or disk is full" in text:
        return "disk full: the database cannot grow; free space on its file system and retry"
    if type(e).__module__.startswith("sqlalchemy"):
        return f"database: {text.split(' (Background on this error')[0].split('[SQL:')[0].strip()}; check " \
               "database_url, the server, and that this user may write there"
    if isinstance(e, OSError):
        return f"{e.strerror or text}{f': {e.filename}' if e.filename else ''}; check the path and its permissions"
    return f"internal error ({type(e).__name__}: {text}); rerun with GPUORCH_DEBUG=1 and report it as a gpuorch bug"


def field_path(loc: Iterable[object]) -> str:
    """A validation error's location as one dotted line. A part that is empty or not printable
    (a key holding a newline, say) is shown quoted, so the message stays one line."""
    return ".".join(part if part.isprintable() and part else repr(part) for part in map(str, loc))

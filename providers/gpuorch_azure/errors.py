"""azure-core exceptions -> gpuorch's domain errors. Pure: no Azure import, no I/O.

Which ARM error codes mean what (docs/azure.md, "Errors"):

- capacity (try the next offer; back this market off a while): SkuNotAvailable, AllocationFailed,
  ZonalAllocationFailed, OverconstrainedAllocationRequest, OverconstrainedZonalAllocationRequest,
  SpotMaxPriceTooLow (not with max price -1, but a user's template may set one).
- quota (same, longer back-off: a human must raise a quota): QuotaExceeded, and
  OperationNotAllowed whose message speaks of a quota ("exceeding approved ... Cores quota",
  the regional, family and spot (low priority) vCPU quotas all arrive so).
- auth (no retry): HTTP 401/403, AuthenticationFailed, AuthorizationFailed, InvalidAuthenticationToken*,
  ExpiredAuthenticationToken, LinkedAuthorizationFailed; a credential the chain could not get.
- transient (retried inside the adapter with tenacity, then TransientError): HTTP 429, 5xx,
  connection errors and timeouts.
- not found: HTTP 404 (ResourceNotFound, NotFound).
- anything else: PermanentError (bad image, bad subnet, invalid parameters, ...).
"""

from __future__ import annotations

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    ProviderError,
    QuotaError,
    TransientError,
)

CAPACITY = frozenset({
    "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest", "SpotMaxPriceTooLow",
})  # fmt: skip
QUOTA = frozenset({"QuotaExceeded"})
AUTH = frozenset({
    "AuthenticationFailed", "AuthorizationFailed", "InvalidAuthenticationToken", "InvalidAuthenticationTokenTenant",
    "InvalidAuthenticationTokenAudience", "ExpiredAuthenticationToken", "LinkedAuthorizationFailed",
})  # fmt: skip
NOT_FOUND = frozenset({"ResourceNotFound", "NotFound"})
TRANSIENT = frozenset({"TooManyRequests", "InternalServerError", "ServiceUnavailable", "GatewayTimeout",
                       "RetryableError", "InternalExecutionError", "ServerTimeout"})
# azure-core exception class names (matched along the MRO, so azure-core need not be imported).
_TRANSIENT_EXC = frozenset({"ServiceRequestError", "ServiceResponseError", "ServiceRequestTimeoutError",
                            "ServiceResponseTimeoutError", "IncompleteReadError"})
_AUTH_EXC = frozenset({"ClientAuthenticationError", "CredentialUnavailableError"})

_AUTH_HINT = ("; check the credential DefaultAzureCredential finds (AZURE_* environment, managed identity, "
              "`az login`) and its role on the resource group (docs/azure.md)")


def is_quota_message(message: str) -> bool:
    return "quota" in message.lower()


def classify(code: str, status: int | None = None, message: str = "") -> type[ProviderError]:
    """The domain error class for an ARM error ``code`` with HTTP ``status``."""
    if code in CAPACITY:
        return NoCapacityError
    if code in QUOTA or (code == "OperationNotAllowed" and is_quota_message(message)):
        return QuotaError
    if code in AUTH or status in (401, 403):
        return AuthError
    if code in NOT_FOUND or status == 404:
        return NotFoundError
    if code in TRANSIENT or status == 429 or (status is not None and status >= 500):
        return TransientError
    return PermanentError


def error_code(exc: BaseException) -> tuple[str, str]:
    """(code, message) of an azure-core HttpResponseError: the ARM error body's, else the status."""
    err = getattr(exc, "error", None)
    code = getattr(err, "code", None)
    message = getattr(err, "message", None)
    if not code:
        status = getattr(exc, "status_code", None)
        code = str(status) if status else type(exc).__name__
    return str(code), str(message or getattr(exc, "message", None) or exc).splitlines()[0]


def translate(exc: BaseException, what: str) -> ProviderError | None:
    """The domain error for an azure-core exception raised by ``what`` (like "create VM x in eastus").

    None for an exception that is not the SDK's (a bug here): let it propagate.
    """
    if isinstance(exc, ProviderError):
        return exc
    if type(exc).__module__.split(".")[0] != "azure":
        return None
    names = {t.__name__ for t in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if names & _AUTH_EXC and status is None:  # the credential chain itself failed: no response at all
        return AuthError(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{_AUTH_HINT}",
                         code=type(exc).__name__)
    if "HttpResponseError" in names:
        code, message = error_code(exc)
        cls = classify(code, status, message)
        text = f"{what}: {code}: {message}"
        if cls is AuthError:
            text += _AUTH_HINT
        if cls is TransientError:
            return TransientError(text, code=code, retry_after=_retry_after(exc))
        return cls(text, code=code)
    if names & _TRANSIENT_EXC:
        return TransientError(f"{what}: {type(exc).__name__}: {exc}", code=type(exc).__name__)
    return PermanentError(f"{what}: {type(exc).__name__}: {exc}", code=type(exc).__name__)


def _retry_after(exc: BaseException) -> float:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        return max(0.0, float(headers.get("Retry-After", 5.0)))
    except (TypeError, ValueError):
        return 5.0

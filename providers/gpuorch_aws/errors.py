"""botocore exceptions -> gpuorch's domain errors. Pure: no boto3 import, no I/O.

Which EC2 codes mean what (docs/aws.md, "Errors"):

- capacity (the reconciler tries the next offer, backs this market off a while):
  InsufficientInstanceCapacity, InsufficientCapacity, InsufficientHostCapacity,
  InsufficientReservedInstanceCapacity, SpotMaxPriceTooLow, UnfulfillableCapacity.
- quota (same, but a longer back-off: a human must raise the limit): VcpuLimitExceeded,
  InstanceLimitExceeded, MaxSpotInstanceCountExceeded (an account limit on spot instances,
  not the market running dry), VolumeLimitExceeded.
- transient (retried inside the adapter, then TransientError): throttling codes, any 5xx,
  and connection errors and timeouts.
- auth (no retry): rejected, expired or missing credentials, missing IAM permissions.
- not found: the instance or volume an operation addressed does not exist (anymore).
- anything else: PermanentError (bad parameters, unknown AMI, wrong subnet...).
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
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "SpotMaxPriceTooLow", "UnfulfillableCapacity",
})  # fmt: skip
QUOTA = frozenset({"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded", "VolumeLimitExceeded"})
THROTTLING = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "ServiceUnavailable", "Unavailable",
    "InternalError", "InternalFailure", "ServerInternal", "RequestTimeout", "RequestTimeoutException",
})  # fmt: skip
AUTH = frozenset({
    "AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
    "RequestExpired", "SignatureDoesNotMatch", "OptInRequired", "Blocked", "AccessDenied", "AccessDeniedException",
})  # fmt: skip
NOT_FOUND = frozenset({
    "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed", "InvalidVolume.NotFound", "InvalidVolumeID.Malformed",
    "InvalidPlacementGroup.Unknown",
})  # fmt: skip
# botocore exception class names (matched along the MRO, so botocore need not be imported).
# ResponseParserError: a body botocore cannot parse, which is what a proxy's or a load balancer's
# HTML 502/503 page gives; botocore's own message says "further retries may succeed".
_TRANSIENT_EXC = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                            "ConnectionClosedError", "ProxyConnectionError", "HTTPClientError",
                            "ResponseParserError"})
_AUTH_EXC = frozenset({"NoCredentialsError", "PartialCredentialsError", "ProfileNotFound", "TokenRetrievalError",
                       "UnauthorizedSSOTokenError", "SSOTokenLoadError", "CredentialRetrievalError",
                       "NoAuthTokenError"})

_AUTH_HINT = "; check the credentials boto3 finds (env, profile, SSO, instance role) and the IAM policy in docs/aws.md"


def classify(code: str, status: int | None = None) -> type[ProviderError]:
    """The domain error class for an AWS error ``code`` with HTTP ``status``."""
    if code in CAPACITY:
        return NoCapacityError
    if code in QUOTA:
        return QuotaError
    if code in AUTH:
        return AuthError
    if code in NOT_FOUND:
        return NotFoundError
    if code in THROTTLING or (status is not None and status >= 500):
        return TransientError
    return PermanentError


def translate(exc: BaseException, what: str) -> ProviderError | None:
    """The domain error for a botocore exception raised by ``what`` (like "RunInstances in us-east-1").

    None for an exception that is not the SDK's (a bug here, or a test double's): let it propagate.
    """
    if isinstance(exc, ProviderError):
        return exc
    if type(exc).__module__.split(".")[0] not in ("botocore", "boto3"):
        return None
    names = {t.__name__ for t in type(exc).__mro__}
    response = getattr(exc, "response", None)
    if "ClientError" in names and isinstance(response, dict):
        err = response.get("Error") or {}
        code = str(err.get("Code") or "Unknown")
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        cls = classify(code, status)
        message = f"{what}: {code}: {err.get('Message') or 'no message'}"
        if cls is AuthError:
            message += _AUTH_HINT
        return cls(message, code=code)
    if names & _AUTH_EXC:
        return AuthError(f"{what}: {exc}{_AUTH_HINT}", code=type(exc).__name__)
    if names & _TRANSIENT_EXC:
        return TransientError(f"{what}: {exc}", code=type(exc).__name__)
    return PermanentError(f"{what}: {type(exc).__name__}: {exc}", code=type(exc).__name__)

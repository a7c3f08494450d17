"""Error translation (a pure mapping) and the retry path, against moto through the real client."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, ReadTimeoutError
from moto_helpers import Refusals

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    QuotaError,
    TransientError,
)
from gpuorch_aws import AwsProvider
from gpuorch_aws.config import parse_options
from gpuorch_aws.errors import classify, translate

pytestmark = pytest.mark.aws


@pytest.mark.parametrize(("code", "status", "expected"), [
    ("InsufficientInstanceCapacity", 500, NoCapacityError),  # EC2 sends it as a 500; still capacity
    ("InsufficientCapacity", 400, NoCapacityError),
    ("InsufficientHostCapacity", 400, NoCapacityError),
    ("SpotMaxPriceTooLow", 400, NoCapacityError),
    ("UnfulfillableCapacity", 400, NoCapacityError),
    ("MaxSpotInstanceCountExceeded", 400, QuotaError),
    ("VcpuLimitExceeded", 400, QuotaError),
    ("InstanceLimitExceeded", 400, QuotaError),
    ("RequestLimitExceeded", 503, TransientError),
    ("Throttling", 400, TransientError),
    ("ThrottlingException", 400, TransientError),
    ("SomethingNew", 503, TransientError),
    ("AuthFailure", 401, AuthError),
    ("UnauthorizedOperation", 403, AuthError),
    ("InvalidClientTokenId", 403, AuthError),
    ("ExpiredToken", 400, AuthError),
    ("InvalidInstanceID.NotFound", 400, NotFoundError),
    ("InvalidVolume.NotFound", 400, NotFoundError),
    ("InvalidAMIID.NotFound", 400, PermanentError),
    ("InvalidParameterValue", 400, PermanentError),
])  # fmt: skip
def test_classify(code: str, status: int, expected: type) -> None:
    assert classify(code, status) is expected


def client_error(code: str, status: int = 400, op: str = "RunInstances") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "msg"}, "ResponseMetadata": {"HTTPStatusCode": status}}, op)


def test_translate_keeps_the_code_and_names_the_call() -> None:
    err = translate(client_error("VcpuLimitExceeded"), "ec2 RunInstances in us-east-1")
    assert isinstance(err, QuotaError) and err.code == "VcpuLimitExceeded"
    assert str(err) == "ec2 RunInstances in us-east-1: VcpuLimitExceeded: msg"
    auth = translate(client_error("UnauthorizedOperation", 403), "ec2 RunInstances in us-east-1")
    assert isinstance(auth, AuthError) and "docs/aws.md" in str(auth)


def test_translate_sdk_exceptions_and_leaves_others_alone() -> None:
    assert isinstance(translate(EndpointConnectionError(endpoint_url="https://x"), "w"), TransientError)
    assert isinstance(translate(ReadTimeoutError(endpoint_url="https://x"), "w"), TransientError)
    assert isinstance(translate(NoCredentialsError(), "w"), AuthError)
    assert translate(KeyError("bug"), "w") is None


# -- the retry path, through the real botocore client and moto -------------------------------------
def test_throttling_is_retried_with_growing_jittered_backoff_then_succeeds(
    provider: AwsProvider, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    hook = Refusals(provider.client("us-east-1"), "DescribeInstances", "RequestLimitExceeded", 503, times=3)
    assert provider.list_managed() == []
    assert hook.calls == 4 and hook.failed == 3
    assert len(sleeps) == 3 and all(0 <= s <= 0.5 * 2**i for i, s in enumerate(sleeps))
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 3 and "RequestLimitExceeded" in retries[0].getMessage()


def test_a_call_that_keeps_failing_becomes_a_transient_error(provider: AwsProvider, sleeps: list[float]) -> None:
    hook = Refusals(provider.client("us-east-1"), "DescribeInstances", "InternalError", 500)
    with pytest.raises(TransientError, match=r"InternalError.*gave up after 5 attempts") as e:
        provider.list_managed()
    assert e.value.code == "InternalError" and hook.calls == 5 and len(sleeps) == 4


def test_connection_errors_are_retried(provider: AwsProvider, sleeps: list[float]) -> None:
    hook = Refusals(provider.client("us-east-1"), "DescribeInstances", times=1,
                    raise_=lambda: EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com"))
    assert provider.list_managed() == [] and hook.failed == 1 and len(sleeps) == 1


def test_max_attempts_option_bounds_the_retries(make_provider: Any, sleeps: list[float]) -> None:
    provider = make_provider(max_attempts=2)
    Refusals(provider.client("us-east-1"), "DescribeInstances", "Throttling")
    with pytest.raises(TransientError, match="gave up after 2 attempts"):
        provider.list_managed()
    assert len(sleeps) == 1


@pytest.mark.parametrize(("code", "expected"), [
    ("InsufficientInstanceCapacity", NoCapacityError), ("VcpuLimitExceeded", QuotaError),
    ("MaxSpotInstanceCountExceeded", QuotaError), ("UnauthorizedOperation", AuthError),
    ("InvalidParameterValue", PermanentError),
])  # fmt: skip
def test_launch_errors_are_not_retried(provider: AwsProvider, moto_offers: list, sleeps: list[float],
                                       code: str, expected: type) -> None:
    from gpuorch.provider.port import LaunchRequest

    hook = Refusals(provider.client("us-east-1"), "RunInstances", code)
    offer = next(o for o in moto_offers if o.region == "us-east-1")
    with pytest.raises(expected) as e:
        provider.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=True))
    assert getattr(e.value, "code", None) == code and hook.calls == 1 and sleeps == []
    assert provider.list_managed() == []


def test_missing_credentials_are_an_auth_error_without_retry(moto: None, monkeypatch: pytest.MonkeyPatch,
                                                             sleeps: list[float]) -> None:
    import boto3

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key)
    # 127.0.0.1:9 (discard): nothing is ever sent, the SDK fails before signing the request.
    opts = parse_options({"regions": ["us-east-1"], "endpoint_url": "http://127.0.0.1:9"})
    provider = AwsProvider(opts, session=boto3.Session(), prices=lambda r: {}, sleep=sleeps.append)
    with pytest.raises(AuthError, match=r"Unable to locate credentials.*check the credentials"):
        provider.list_managed()
    assert sleeps == []

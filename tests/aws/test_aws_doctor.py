"""The AWS adapter's doctor self-check against moto: the credential chain's answer and each
EC2 permission the adapter needs, refusals injected as EC2 would answer them."""

from __future__ import annotations

import pytest
from moto_helpers import Refusals

from gpuorch.provider.port import SupportsDoctor

pytestmark = pytest.mark.aws


def test_credentials_and_every_permission_granted(provider):
    assert isinstance(provider, SupportsDoctor)
    [f] = provider.doctor()
    assert f.status == "ok" and f.check == "provider aws"
    assert f.message.startswith("credentials from env;")
    for permission in ("ec2:DescribeInstances in us-east-1", "ec2:RunInstances in us-west-2",
                       "ec2:CreateTags in us-east-1", "ec2:TerminateInstances in us-west-2"):
        assert permission in f.message
    assert "testing" not in f.message  # the (fake) key and secret are never printed


def test_a_refused_permission_fails_naming_it_and_the_fix(provider):
    Refusals(provider.client("us-west-2"), "TerminateInstances", "UnauthorizedOperation")
    Refusals(provider.client("us-east-1"), "RunInstances", "UnauthorizedOperation",
             when=lambda body: body.get("DryRun") == "true")
    found = provider.doctor()
    failed = {f.message for f in found if f.status == "fail"}
    assert failed == {"credentials from env: ec2:TerminateInstances in us-west-2 refused (UnauthorizedOperation)",
                      "credentials from env: ec2:RunInstances in us-east-1 refused (UnauthorizedOperation)"}
    assert all("IAM policy" in (f.fix or "") for f in found if f.status == "fail")


def test_a_probe_that_cannot_answer_is_a_warning_not_a_failure(provider):
    Refusals(provider.client("us-east-1"), "DescribeSubnets", "InvalidParameterValue")
    [f] = provider.doctor()
    assert f.status == "warn" and "ec2:DescribeSubnets in us-east-1 could not be checked" in f.message


def test_no_credentials_found_by_the_chain(provider, monkeypatch):
    monkeypatch.setattr(provider._ec2.session, "get_credentials", lambda: None)
    [f] = provider.doctor()
    assert f.status == "fail" and "found no credentials" in f.message and "AWS_PROFILE" in f.fix

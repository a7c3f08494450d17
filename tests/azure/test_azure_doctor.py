"""The Azure adapter's doctor self-check against the fake ARM: a token from the credential,
then the VM reads, refusals injected as ARM answers them (403 AuthorizationFailed)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.provider.port import SupportsDoctor

pytestmark = pytest.mark.azure


def test_token_and_reads_granted(provider, arm):
    assert isinstance(provider, SupportsDoctor)
    [f] = provider.doctor()
    assert f.status == "ok", f
    assert f.message.startswith("credentials from StaticToken; granted: Microsoft.Compute/virtualMachines/read")
    assert arm.token not in f.message  # the token is never printed


def test_a_refused_read_fails_naming_the_permission(provider, arm):
    arm.fail_http(403, "AuthorizationFailed", count=None)
    found = provider.doctor()
    assert {f.status for f in found} == {"fail"}
    assert all("refused (AuthorizationFailed)" in f.message and "Virtual Machine Contributor" in (f.fix or "")
               for f in found), found


def test_a_credential_without_a_token_fails_without_printing_it(make_provider):
    class NoToken:
        def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise RuntimeError("secret-in-the-message")

    [f] = make_provider(credential=NoToken()).doctor()
    assert f.status == "fail" and f.message == "NoToken got no token for ARM (RuntimeError)"
    assert "az login" in (f.fix or "")

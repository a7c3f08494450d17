"""The Azure adapter's doctor self-check against the fake ARM: where the prices come from (gpuorch
ships none), a token from the credential, then the VM reads, refusals injected as ARM answers them
(403 AuthorizationFailed)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.provider.port import SupportsDoctor

pytestmark = pytest.mark.azure


def test_token_and_reads_granted(provider, arm):
    assert isinstance(provider, SupportsDoctor)
    prices, f = provider.doctor()
    assert prices.status == "ok" and prices.message.startswith("prices from the last Retail Prices refresh, ")
    assert f.status == "ok", f
    assert f.message.startswith("credentials from StaticToken; granted: Microsoft.Compute/virtualMachines/read")
    assert arm.token not in f.message  # the token is never printed


def test_a_refused_read_fails_naming_the_permission(provider, arm):
    arm.fail_http(403, "AuthorizationFailed", count=None)
    _, *found = provider.doctor()
    assert {f.status for f in found} == {"fail"}
    assert all("refused (AuthorizationFailed)" in f.message and "Virtual Machine Contributor" in (f.fix or "")
               for f in found), found


def test_a_credential_without_a_token_fails_without_printing_it(make_provider):
    class NoToken:
        def get_token(self, *scopes: str, **kwargs: Any) -> Any:
            raise RuntimeError("secret-in-the-message")

    _, f = make_provider(credential=NoToken()).doctor()
    assert f.status == "fail" and f.message == "NoToken got no token for ARM (RuntimeError)"
    assert "az login" in (f.fix or "")


def test_without_prices_it_warns_and_says_how_to_get_them(make_provider):
    prices, access = make_provider(priced=False).doctor()
    assert (prices.status, prices.check, prices.message) == ("warn", "provider azure prices",
                                                             "no Azure prices yet: gpuorch ships none")
    assert "gpuorch catalog refresh --provider azure" in (prices.fix or "") and "at start" in (prices.fix or "")
    assert access.status == "ok"


def test_a_configured_catalog_is_named(make_provider, tmp_path):
    import azure_test_catalog

    [prices, _] = make_provider(priced=False, catalog=str(azure_test_catalog.FILE)).doctor()
    assert prices.status == "ok" and prices.message == f"prices from providers.azure.catalog {azure_test_catalog.FILE}"

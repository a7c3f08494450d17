"""Vast's ``doctor()`` self-check: where the API key comes from (``VAST_API_KEY`` or vastai's key
file; only the source is printed, never the key), whether it opens an account (``GET
/api/v0/users/current``), that account's credit, and each private registry's secret variable (set
or not, never its value)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuorch.errors import ProviderError
from gpuorch.provider import Finding
from gpuorch.provider.registry_creds import registry_findings

from .credentials import MISSING, find_key

if TYPE_CHECKING:
    from .provider import VastProvider


def doctor(p: VastProvider) -> list[Finding]:
    out: list[Finding] = registry_findings("vast", p.options.registries)
    found = find_key()
    if found is None:
        return [Finding.fail("vast.credentials", "no Vast API key found", MISSING), *out]
    out.append(Finding.ok("vast.credentials", f"API key from {found[1]}"))
    try:
        user = p.api.user()
    except ProviderError as e:
        return [*out, Finding.fail("vast.account", f"the key opens no account: {e}",
                                   "create a key at https://cloud.vast.ai/manage-keys/ and set VAST_API_KEY")]
    who = user.get("username") or user.get("id") or "unknown"
    out.append(Finding.ok("vast.account", f"account {who} at {p.api.server_url}"))
    credit = user.get("credit")
    if isinstance(credit, int | float) and credit <= 0:
        out.append(Finding.warn("vast.credit", f"credit is ${credit:.2f}: launches will be refused",
                                "add credit at https://cloud.vast.ai/billing/"))
    return out

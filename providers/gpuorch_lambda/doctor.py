"""Lambda's ``doctor()`` self-check: where the API key came from (never the key), whether the API
accepts it (one read-only listing), and whether the configured regions exist."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuorch.errors import AuthError, ProviderError
from gpuorch.provider import Finding

from .config import ENV_KEY, key_source

if TYPE_CHECKING:
    from .provider import LambdaProvider


def doctor(p: LambdaProvider) -> list[Finding]:
    check = f"provider {p.name}"
    source, path = key_source(p.options)
    where = f"${ENV_KEY}" if source == "env" else str(path)
    try:
        types = p._api.instance_types()
    except AuthError as e:
        return [Finding.fail(check, f"the API refused the key from {where}: {e.code}",
                             f"create a key at https://cloud.lambda.ai/api-keys and set {ENV_KEY} or "
                             "providers.lambda.api_key_file")]
    except ProviderError as e:
        return [Finding.warn(check, f"the API did not answer: {e}", f"check {p.options.endpoint} is reachable")]
    findings = [Finding.ok(check, f"API key from {where} accepted; {len(types)} instance types listed")]
    regions = {str(r.get("name")) for t in types.values() for r in t.get("regions_with_capacity_available") or ()}
    for r in p.options.regions:
        if r not in regions:
            findings.append(Finding.warn(check, f"region {r} has no capacity for any instance type now",
                                         "leave it, or add another region to providers.lambda.regions"))
    try:
        p._api.instances()
        findings.append(Finding.ok(check, "instances can be listed"))
    except ProviderError as e:
        findings.append(Finding.fail(check, f"listing instances failed: {e}", "check the key's account is active"))
    return findings

"""Azure's ``doctor()`` self-check: a token for ARM from the credential chain
(``DefaultAzureCredential``: environment, workload or managed identity, Azure CLI login), then
each ARM permission the adapter needs that a read can show (docs/azure.md, "Permissions").

ARM has no dry run for VM writes: create and delete (``virtualMachines/write``/``delete``)
are left to the first launch. Only the credential's class is printed, never the token. First, where
the prices come from (``offers.prices_line``): gpuorch ships no Azure prices, so before the first
Retail Prices refresh this is a warning that says how to get them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuorch.errors import NotFoundError
from gpuorch.provider import Finding
from gpuorch.provider.selfcheck import Probe, permission_findings

from .offers import REFRESH_HINT, prices_line

if TYPE_CHECKING:
    from .provider import AzureProvider

ARM_SCOPE = "https://management.azure.com/.default"
FIX = ("give the identity the chain finds the Virtual Machine Contributor and Network Contributor roles on "
       "providers.azure.resource_group (docs/azure.md)")


def probes(p: AzureProvider) -> list[Probe]:
    arm, rg = p._arm, p.options.resource_group

    def read_one() -> None:
        try:  # a name no VM has: "not found" means the read was allowed
            arm.get_vm("gpuorch-doctor-probe")
        except NotFoundError:
            pass

    return [(f"Microsoft.Compute/virtualMachines/read in {rg} (list)", arm.list_vms),
            (f"Microsoft.Compute/virtualMachines/read in {rg} (get)", read_one),
            (f"Microsoft.Compute/disks/read in {rg} (job volumes)", arm.list_disks),
            (f"Microsoft.Compute/proximityPlacementGroups/read in {rg} (gangs)", arm.list_ppgs)]


def prices(p: AzureProvider) -> Finding:
    priced, line = prices_line(p.options, p.home)
    check = f"provider {p.name} prices"
    return Finding.ok(check, line) if priced else Finding.warn(check, line.split(";")[0], REFRESH_HINT)


def doctor(p: AzureProvider) -> list[Finding]:
    return [prices(p), *_access(p)]


def _access(p: AzureProvider) -> list[Finding]:
    check = f"provider {p.name}"
    arm = p._arm
    credential = arm.token_credential()
    kind = type(credential).__name__
    try:
        credential.get_token(ARM_SCOPE)
    except Exception as e:  # azure-identity raises several kinds; the name tells which
        return [Finding.fail(check, f"{kind} got no token for ARM ({type(e).__name__})",
                             "run `az login`, set AZURE_CLIENT_ID/AZURE_TENANT_ID with a secret or certificate, "
                             "or give the daemon's VM a managed identity")]
    return permission_findings(check, kind, probes(p), FIX)

"""``gpuorch doctor`` for RunPod: where the API key was found (``$RUNPOD_API_KEY`` or the runpod
CLI's ``~/.runpod/config.toml``; never its value) and one read per kind of call the adapter
makes (the account, GPU types, pods), and each private registry's secret variable (set or not, never
its value). Nothing is created or changed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuorch.errors import UserInputError
from gpuorch.provider import Finding
from gpuorch.provider.registry_creds import registry_findings
from gpuorch.provider.selfcheck import permission_findings

from . import documents as doc
from .config import KEY_ENV, api_key

if TYPE_CHECKING:
    from .provider import RunpodProvider

FIX = (f"set {KEY_ENV} to an API key with read/write access (RunPod console: Settings > API Keys), "
       "or run `runpod config`")


def doctor(provider: RunpodProvider) -> list[Finding]:
    check = "provider runpod"
    try:
        _, where = api_key(provider.options.profile)
    except UserInputError as e:
        return [Finding.fail(check, str(e), FIX)]
    api = provider._api  # the adapter's own client
    return [*permission_findings(check, where, [
        ("read the account (myself)", lambda: api.query(doc.MYSELF, what="doctor: account")),
        ("list GPU types (gpuTypes)", lambda: api.query(doc.GPU_TYPES, what="doctor: GPU types")),
        ("list pods (myself.pods)", lambda: api.query(doc.PODS, what="doctor: pods")),
    ], FIX), *registry_findings("runpod", provider.options.registries)]

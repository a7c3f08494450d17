"""``providers.kubernetes``: options, and the kubeconfig chain they resolve through.

Credentials come from the standard chain, as ``kubectl`` finds them: ``kubeconfig`` (an option),
else ``$KUBECONFIG`` (a ``:``-separated list, merged: the first file naming a context, cluster or
user wins), else ``~/.kube/config``, else the pod's service account (in-cluster). gpuorch never
stores them. Each entry of ``contexts`` is one region: a kubeconfig context and a namespace.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuorch.errors import UserInputError
from gpuorch.provider.options import fix_hint

PREFIX = "providers.kubernetes"
IN_CLUSTER = "in-cluster"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_RESOURCE = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"
MAX_USD = 1e9
KNOWN = "kubeconfig, contexts, termination_grace_s, python, node_lost_s"
CONTEXT_KNOWN = ("context, region, namespace, price_per_gpu_hour, image, gpu_resource, priority_class, local_queue, "
                 "storage_class")


class ContextOptions(BaseModel):
    """One region: ``providers.kubernetes.contexts[i]``."""

    model_config = ConfigDict(extra="forbid")

    context: str | None = Field(default=None, min_length=1, max_length=253)  # None: the kubeconfig's current-context
    region: str | None = Field(default=None, max_length=63, pattern=_DNS_LABEL)  # default: from the context name
    namespace: str | None = Field(default=None, max_length=63, pattern=_DNS_LABEL)  # default: the context's, or default
    # USD per GPU-hour: 0 for a cluster you own, or an amortised or internal rate. Caps count it.
    price_per_gpu_hour: float = Field(default=0.0, ge=0, le=MAX_USD, allow_inf_nan=False)
    image: str = Field(default="python:3.11-slim", min_length=1, max_length=512, pattern=r"^[^\s]+$")
    gpu_resource: str = Field(default="nvidia.com/gpu", max_length=253, pattern=_RESOURCE)
    priority_class: str | None = Field(default=None, max_length=253, pattern=_DNS_LABEL)
    local_queue: str | None = Field(default=None, max_length=63, pattern=_DNS_LABEL)  # Kueue LocalQueue
    # The StorageClass of job volumes (PersistentVolumeClaims); None: the cluster's default class.
    storage_class: str | None = Field(default=None, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

    @field_validator("price_per_gpu_hour", mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("give a number of USD per GPU-hour, like 0 or 1.20")
        return v


class KubernetesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kubeconfig: Path | None = None
    contexts: list[ContextOptions] = Field(default_factory=lambda: [ContextOptions()], min_length=1, max_length=64)
    termination_grace_s: int = Field(default=60, ge=5, le=3600)  # the pod's notice before SIGKILL
    python: str = Field(default="python3", min_length=1, max_length=256, pattern=r"^[^\s]+$")  # in the image
    node_lost_s: float = Field(default=60.0, gt=0, le=86400, allow_inf_nan=False)  # NotReady this long: lost


def parse_options(options: dict[str, Any]) -> KubernetesOptions:
    try:
        return KubernetesOptions.model_validate(options or {})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        known = CONTEXT_KNOWN if len(err["loc"]) > 2 and err["loc"][0] == "contexts" else KNOWN
        if err["type"] == "extra_forbidden":
            raise UserInputError(f"{PREFIX}.{where}: unknown option; known: {known}") from None
        msg = fix_hint(err) or err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch":
            msg = f"{err['input']!r} is not valid here ({msg})"
        raise UserInputError(f"{PREFIX}.{where}: {msg}") from None


def _files(options: KubernetesOptions) -> list[Path]:
    if options.kubeconfig is not None:
        path = options.kubeconfig.expanduser()
        if not path.is_file():
            raise UserInputError(f"{PREFIX}.kubeconfig: {path} is not a readable file; fix the path, or drop the "
                                 "option to use $KUBECONFIG, ~/.kube/config or the in-cluster service account")
        return [path]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        found = [Path(p).expanduser() for p in env.split(os.pathsep) if p and Path(p).expanduser().is_file()]
        if not found:
            raise UserInputError(f"KUBECONFIG: none of {env!r} is a readable file; fix the variable, or set "
                                 f"{PREFIX}.kubeconfig")
        return found
    home = Path("~/.kube/config").expanduser()
    return [home] if home.is_file() else []


def _merged(files: list[Path]) -> dict[str, Any]:
    """``kubectl``'s merge of several kubeconfig files: the first to name an entry wins."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": [], "current-context": None}
    for path in files:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise UserInputError(f"{PREFIX}.kubeconfig: {path} is not a kubeconfig file "
                                 f"({type(e).__name__}); fix or replace it") from None
        if not isinstance(data, dict):
            raise UserInputError(f"{PREFIX}.kubeconfig: {path} is not a kubeconfig file; fix or replace it")
        for key in ("clusters", "users", "contexts"):
            seen = {e.get("name") for e in merged[key]}
            entries = data.get(key) or []
            if not isinstance(entries, list):
                raise UserInputError(f"{PREFIX}.kubeconfig: {path}: {key} is not a list; fix the file")
            for entry in entries:
                if isinstance(entry, dict) and entry.get("name") not in seen:
                    merged[key].append(_absolute(entry, path.parent))
        merged["current-context"] = merged["current-context"] or data.get("current-context")
    return merged


def _absolute(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    """Relative certificate and key paths are relative to the kubeconfig file that names them."""
    body = dict(entry)
    for part in ("cluster", "user"):
        inner = dict(body.get(part) or {})
        for key in ("certificate-authority", "client-certificate", "client-key", "tokenFile"):
            if isinstance(inner.get(key), str) and not Path(inner[key]).is_absolute():
                inner[key] = str(base / inner[key])
        if inner:
            body[part] = inner
    return body


class Region:
    """One configured context, resolved: its kubeconfig (as a lightkube ``KubeConfig``) and names."""

    def __init__(self, index: int, options: ContextOptions, config: Any, context: str, namespace: str) -> None:
        self.index, self.options, self.config = index, options, config
        self.context, self.namespace = context, namespace
        self.name = options.region or region_name(context)
        self.where = f"{PREFIX}.contexts.{index}"


def region_name(context: str) -> str:
    """A region name from a context name (``arn:aws:eks:...:cluster/lab`` -> ``cluster-lab``...)."""
    name = re.sub(r"[^a-z0-9-]+", "-", context.lower()).strip("-")[-63:].strip("-")
    return name or "cluster"


def resolve(options: KubernetesOptions) -> list[Region]:
    """Each configured context resolved through the chain; UserInputError naming the option."""
    from lightkube import KubeConfig

    files = _files(options)
    merged = _merged(files) if files else None
    regions: list[Region] = []
    for i, ctx in enumerate(options.contexts):
        where = f"{PREFIX}.contexts.{i}.context"
        if merged is None:
            if not os.environ.get("KUBERNETES_SERVICE_HOST"):
                raise UserInputError(f"{PREFIX}.kubeconfig: no kubeconfig found ($KUBECONFIG unset, no "
                                     "~/.kube/config, not in a cluster); set the option or KUBECONFIG")
            if ctx.context not in (None, IN_CLUSTER):
                raise UserInputError(f"{where}: {ctx.context!r}: no kubeconfig file names it (only the in-cluster "
                                     f"service account was found); drop the option or set {PREFIX}.kubeconfig")
            config = KubeConfig.from_service_account()
            current = config.contexts.get(config.current_context or "")
            regions.append(Region(i, ctx, config, IN_CLUSTER, ctx.namespace or (current.namespace if current else None)
                                  or "default"))
            continue
        names = [c.get("name") for c in merged["contexts"]]
        name = ctx.context or merged["current-context"]
        if not name:
            raise UserInputError(f"{where}: the kubeconfig has no current-context; name one of: "
                                 f"{', '.join(map(str, names)) or '(none)'}")
        if name not in names:
            raise UserInputError(f"{where}: {name!r} is not a context of {', '.join(map(str, files))}; name one "
                                 f"of: {', '.join(map(str, names)) or '(none)'}")
        try:
            config = KubeConfig.from_dict({**merged, "current-context": name}, fname=files[0])
            cluster = config.contexts[name]
            if cluster.cluster not in config.clusters or (cluster.user and cluster.user not in config.users):
                raise KeyError(cluster.cluster)
        except Exception as e:  # lightkube raises several kinds for a bad file
            raise UserInputError(f"{where}: context {name!r} is incomplete in the kubeconfig ({type(e).__name__}: "
                                 f"{str(e)[:120]}); fix its cluster and user entries") from None
        regions.append(Region(i, ctx, config, name, ctx.namespace or cluster.namespace or "default"))
    seen: dict[str, int] = {}
    for r in regions:
        if r.name in seen:
            raise UserInputError(f"{r.where}.region: {r.name!r} is also contexts.{seen[r.name]}'s region; "
                                 "give each context its own region name")
        seen[r.name] = r.index
    return regions

"""GCP's ``doctor()`` self-check: the credentials google-auth's standard chain finds, and each
Compute Engine permission the adapter needs, one listing apiece (docs/gcp.md, "Permissions").

GCE has no dry run: instance insert and delete (``compute.instances.create``/``delete``) cannot
be probed without creating something, so they are left to the first launch. Only the
credentials' kind is printed (a service account, the VM's metadata server, a user login),
never a token or key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuorch.provider import TAG_MANAGED, Finding
from gpuorch.provider.selfcheck import Probe, permission_findings

from .names import label_filter, label_key

if TYPE_CHECKING:
    from .provider import GcpProvider

FIX = ("grant the identity google-auth finds roles/compute.instanceAdmin.v1 on the project (docs/gcp.md), "
       "or point GOOGLE_APPLICATION_CREDENTIALS at a key that has it")


def kind(credentials: Any) -> str:
    """A credential object's kind, as ``module.Class`` (never its content)."""
    return f"{type(credentials).__module__}.{type(credentials).__qualname__}"


def credentials_source(p: GcpProvider) -> tuple[str | None, Finding | None]:
    given = p._gce.credentials
    if given is not None:
        return kind(given) + (f" (test endpoint {p.options.endpoint})" if p.options.endpoint else ""), None
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        found, _ = google.auth.default()
    except DefaultCredentialsError:
        return None, Finding.fail(f"provider {p.name}", "google-auth's credential chain found no credentials",
                                  "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS "
                                  "to a service-account key, or run on a VM with a service account")
    return kind(found), None


def probes(p: GcpProvider) -> list[Probe]:
    gce, managed = p._gce, label_filter({label_key(TAG_MANAGED): "true"})
    zones = sorted({o.zone for o in p.offers()})[:3]  # a few zones: each listing costs a round trip
    return [
        ("compute.instances.list (aggregated)", lambda: gce.list_aggregated(managed)),
        ("compute.globalOperations.list (aggregated)", lambda: gce.operations(managed)),
        *((f"compute.instances.list in {z}", lambda z=z: gce.list_zone(z, managed)) for z in zones),
        *((f"compute.zoneOperations.list in {z}", lambda z=z: gce.operations(managed, zone=z)) for z in zones),
        ("compute.disks.list (aggregated; job volumes)", lambda: gce.list_disks(managed)),
        ("compute.resourcePolicies.list (aggregated; gangs' placement policies)", gce.list_policies),
    ]


def doctor(p: GcpProvider) -> list[Finding]:
    source, failed = credentials_source(p)
    if failed is not None:
        return [failed]
    assert source is not None
    return permission_findings(f"provider {p.name}", source, probes(p), FIX)

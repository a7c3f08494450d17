"""``gpuorch catalog refresh --provider gcp`` (and the daemon's scheduled refresh): today's GCP
offers from the Compute Engine API (machine types with their GPUs, and the accelerator types N1
VMs attach per zone) and the Cloud Billing Catalog API (list prices, on-demand and spot), priced
by ``pricing.py``.

Errors say what to fix in one line: a refused call names the permission or the API to enable
(the Billing Catalog needs the Cloud Billing API enabled in the project the credentials belong
to; listing machine types needs ``compute.machineTypes.list``, accelerator types
``compute.acceleratorTypes.list``); an answer that does not parse
is a PermanentError, and the caller keeps its last catalog.
"""

from __future__ import annotations

from gpuorch.errors import AuthError, PermanentError
from gpuorch.provider import Offer

from .calls import Gce
from .config import GcpOptions
from .offers import select_offers
from .pricing import COMPUTE_SERVICE, SkuError, machine_rows, n1_rows, sku_prices

BILLING_FIX = ("enable the Cloud Billing API for the credentials' project "
               "(`gcloud services enable cloudbilling.googleapis.com`)")
COMPUTE_FIX = ("grant compute.machineTypes.list and compute.acceleratorTypes.list (roles/compute.viewer) on "
               "providers.gcp.project")


def live_offers(gce: Gce, options: GcpOptions) -> list[Offer]:
    try:
        machine_types = gce.machine_types()
        accelerator_types = gce.accelerator_types()
    except AuthError as e:
        raise AuthError(f"gcp catalog refresh: listing machine or accelerator types was refused: {COMPUTE_FIX} "
                        f"({e})", code=e.code) from None
    try:
        skus = gce.skus(COMPUTE_SERVICE)
    except PermanentError as e:  # SERVICE_DISABLED / accessNotConfigured arrive as 403s
        raise AuthError(f"gcp catalog refresh: the Cloud Billing Catalog refused the price listing: {BILLING_FIX} "
                        f"({e})", code=e.code) from None
    try:
        prices = sku_prices(skus)
        machine_types = [m for m in machine_types if options.allows(_zone(m))]
        rows = machine_rows(machine_types, prices)
        rows += n1_rows(machine_types, (a for a in accelerator_types if options.allows(_zone(a))), prices)
    except SkuError as e:
        raise PermanentError(f"gcp catalog refresh: an answer did not parse: {e}", code="Unparseable") from None
    return select_offers((Offer(**r._asdict()) for r in rows), options)


def _zone(item: dict[str, object]) -> str:
    return str(item.get("zone", "")).rstrip("/").rsplit("/", 1)[-1]

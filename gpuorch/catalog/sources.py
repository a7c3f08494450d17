"""Where every shipped price row comes from, and when (issue 36; docs/catalog.md, "Sources").

The snapshot build (``gpuorch.catalog.snapshot``) writes two columns after the standard ones in
each adapter's ``data/offers.csv``: ``source`` (the cloud's own price API or page the prices were
read from, and the file they were read through) and ``as_of`` (when). Adapters that write their
own rows file (Lambda, RunPod) carry the same two columns per row.

``as_of`` is an ISO 8601 date (``2025-06-01``), a month (``2026-06``), or an interval of two
dates (``2025-06-01/2026-11-29``: fetched no earlier than the first, no later than the second)
where the source does not record its fetch date; ``../2026-11-29`` says no earlier bound is known.
The reader ignores both columns; ``tests/catalog/test_provenance.py`` holds every shipped row to
them.

``licensed`` is False where the only copy of the prices found is in a repository without a
licence; none is left (issue 36 removed Azure's rows, whose only copy was such a repository:
Azure ships no price rows and its prices come from ``gpuorch catalog refresh``), and the test
refuses a new one.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

COLUMNS = ("source", "as_of")
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


@dataclass(frozen=True)
class Provenance:
    source: str
    as_of: str
    licensed: bool = True


# The date AWS's June 2025 P4/P5 on-demand price cut took effect bounds the AWS sample from below
# (it lists p5.48xlarge at $55.04/h in us-east-1, the post-cut price); every sample was committed
# to this project's reference data by 2026-11-29 (the first commit that reads it).
SNAPSHOT: dict[str, Provenance] = {
    "aws": Provenance(
        "AWS Price List API (EC2 on-demand, Linux, per region) and EC2 DescribeSpotPriceHistory (spot, per zone), "
        "via shared/data/catalog-sample/aws-gpu-offers.csv",
        "2025-06-01/2026-11-29",
    ),
    "gcp": Provenance(
        "GCP Cloud Billing Catalog API (Compute Engine host vCPU/RAM and GPU SKUs, on-demand and Spot, per region), "
        "via shared/data/catalog-sample/gcp-gpu-offers.csv",
        "../2026-11-29",
    ),
    "vast": Provenance(
        "Vast.ai marketplace quotes from public pages (Vast publishes no price list), the page per GPU named in "
        "gpuorch_vast/data/sources/vast-marketplace.csv",
        "2026-05/2026-06",
    ),
}


def _date(text: str) -> dt.date:
    if not _DATE.match(text):
        raise ValueError(f"{text!r} is not an ISO date (YYYY-MM-DD or YYYY-MM)")
    return dt.date.fromisoformat(text if len(text) == 10 else text + "-01")


def bounds(as_of: str) -> tuple[dt.date | None, dt.date]:
    """The earliest (None: unknown) and latest date an ``as_of`` value allows; ValueError if malformed."""
    start, sep, end = as_of.partition("/")
    if not sep:
        day = _date(as_of)
        return day, day
    first = None if start == ".." else _date(start)
    last = _date(end)
    if first is not None and first > last:
        raise ValueError(f"{as_of!r}: the interval ends before it starts")
    return first, last

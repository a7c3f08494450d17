"""AWS's catalog: shipped rows (``data/offers.csv``), GPU instance families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without boto3 or
pydantic). Billing: EC2 Linux (on-demand, spot, reserved) bills per second with a 60 s minimum
(AWS, 2017-10-02). Families: the EC2 instance-type pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("aws", r"g4dn\.", "T4", 8, "pcie", 100),
    Family("aws", r"p3\.", "V100", 8, "nvlink", 25),
    Family("aws", r"p3dn\.", "V100-32GB", 8, "nvlink", 100),
    Family("aws", r"g5\.", "A10G", 8, "pcie", 100),
    Family("aws", r"g6\.", "L4", 8, "pcie", 100),
    Family("aws", r"g6e\.", "L40S", 8, "pcie", 400),
    Family("aws", r"p4d\.", "A100", 8, "nvlink", 400),
    Family("aws", r"p4de\.", "A100-80GB", 8, "nvlink", 400),
    Family("aws", r"p5\.", "H100", 8, "nvlink", 3200),
    Family("aws", r"p5en?\.", "H200", 8, "nvlink", 3200),
    Family("aws", r"p6-b200\.", "B200", 8, "nvlink", 3200),
)
# fmt: on

CATALOG = AdapterCatalog(
    provider="aws", billing=BillingRule(1, 60), families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv", builder="gpuorch_aws.snapshot:build",
)

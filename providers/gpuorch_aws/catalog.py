"""AWS's catalog: shipped rows (``data/offers.csv``), GPU instance families and billing rule.

Stdlib-only (entry point ``gpuorch.catalogs``: ``gpuorch offers`` reads it without boto3 or
pydantic). Billing: EC2 Linux (on-demand, spot, reserved) bills per second with a 60 s minimum
(AWS, 2017-10-02). Families: the EC2 instance-type pages (docs/sizing.md, "Instance families").
"""

from __future__ import annotations

from pathlib import Path

from gpuorch.provider.catalog import AdapterCatalog, BillingRule, Family, Shape

# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family("aws", r"g4dn\.", "T4", 8, "pcie", 100),
    Family("aws", r"p3\.", "V100", 8, "nvlink", 25),
    Family("aws", r"p3dn\.", "V100-32GB", 8, "nvlink", 100, "efa"),
    Family("aws", r"g5\.", "A10G", 8, "pcie", 100),
    Family("aws", r"g6\.", "L4", 8, "pcie", 100),
    Family("aws", r"g6e\.", "L40S", 8, "pcie", 400),
    Family("aws", r"p4d\.", "A100", 8, "nvlink", 400, "efa"),
    Family("aws", r"p4de\.", "A100-80GB", 8, "nvlink", 400, "efa"),
    Family("aws", r"p5\.", "H100", 8, "nvlink", 3200, "efa"),
    Family("aws", r"p5en?\.", "H200", 8, "nvlink", 3200, "efa"),
    Family("aws", r"p6-b200\.", "B200", 8, "nvlink", 3200, "efa"),
)

# GPUs, vCPUs and RAM (GiB) per instance type, for the row audit: the EC2 "Accelerated computing
# instance" specifications (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
_EC2 = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
SHAPES: tuple[Shape, ...] = (
    Shape("g5.xlarge", 1, 4, 16, _EC2),
    Shape("g6.xlarge", 1, 4, 16, _EC2),
    Shape("g6e.xlarge", 1, 4, 32, _EC2),
    Shape("g6e.2xlarge", 1, 8, 64, _EC2),
    Shape("p4d.24xlarge", 8, 96, 1152, _EC2),
    Shape("p4de.24xlarge", 8, 96, 1152, _EC2),
    Shape("p5.4xlarge", 1, 16, 256, _EC2),
    Shape("p5.48xlarge", 8, 192, 2048, _EC2),
    Shape("p5e.48xlarge", 8, 192, 2048, _EC2),
    Shape("p5en.48xlarge", 8, 192, 2048, _EC2),
    Shape("p6-b200.48xlarge", 8, 192, 2048, _EC2),
)
# fmt: on

# EBS gp3 (the one type job volumes use here): $0.08 per GB-month of provisioned storage in
# us-east-1, its baseline 3,000 IOPS and 125 MiB/s included (aws.amazon.com/ebs/pricing, 2026-12).
# Other regions list up to about a fifth more: an estimate, like the catalog's other rows.
CATALOG = AdapterCatalog(
    provider="aws", billing=BillingRule(1, 60), families=FAMILIES,
    rows=Path(__file__).resolve().parent / "data" / "offers.csv", builder="gpuorch_aws.snapshot:build",
    shapes=SHAPES, storage_usd_per_gib_month=0.08,
)

"""Lambda's shipped snapshot: audited clean, on-demand only, per-minute billing, provenance per
row; and its offline offers (submit's fit check) respect ``regions`` without an API key."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpuorch.catalog import load_rows
from gpuorch.catalog.audit import audit_rows
from gpuorch_lambda import LambdaProvider
from gpuorch_lambda.catalog import CATALOG, gpus_of

pytestmark = pytest.mark.lambdalabs


def test_the_snapshot_passes_the_audit_and_sells_on_demand_per_minute():
    assert CATALOG.rows is not None
    rows = load_rows(CATALOG.rows)
    assert rows and audit_rows(rows) == []
    assert all(r.provider == "lambda" and r.spot_price_per_hour is None for r in rows)
    assert all((r.billing_granularity_s, r.min_billing_s) == (60, 60) for r in rows)
    assert {r.gpu for r in rows} >= {"H100", "A100", "A100-80GB", "A10", "RTXA6000", "GH200", "B200"}


def test_every_row_names_its_source_and_date():
    """No shipped row has a first-party source (no copy of Lambda's pricing page or of an API answer
    was found): each says so, third-party (a dated page quoting Lambda) or indicative (no copy)."""
    assert CATALOG.rows is not None
    with open(CATALOG.rows, newline="") as f:
        for raw in csv.DictReader(f):
            assert raw["source"].startswith("https://") and len(raw["as_of"]) == 10, raw
            assert raw["provenance"].split(":")[0] in ("third-party", "indicative"), raw
            assert "no first-party copy found" in raw["provenance"], raw
            assert (raw["provenance"].startswith("third-party")) == ("lambda.ai" not in raw["source"]), raw


def test_instance_type_names_read_as_gpus():
    assert gpus_of("gpu_8x_h100_sxm5") == ("H100", 8)
    assert gpus_of("gpu_1x_a100_80gb_sxm4") == ("A100-80GB", 1)
    assert gpus_of("gpu_1x_rtx6000") == ("QUADRO-RTX6000", 1)  # in the GPU table since issue 33
    assert gpus_of("gpu_1x_quadro_p4000") is None and gpus_of("cpu_4x_general") is None


def test_offline_offers_need_no_key_and_keep_to_the_regions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    offers = LambdaProvider.catalog_offers({"regions": ["us-west-1"]}, tmp_path)
    assert offers and {o.region for o in offers} == {"us-west-1"}

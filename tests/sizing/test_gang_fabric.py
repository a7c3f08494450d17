"""A multi-node job is sized over every shipped family, those whose network is unpublished too.

Some markets publish no network between nodes (0 Gb/s in their family table); sizing then
assumes its unknown fabric instead of dividing by zero (``gpuorch plan`` of a 2-node job over the
shipped price list ended in an internal error).
"""

from __future__ import annotations

import math

from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.catalog.adapter import AdapterCatalog, Family
from gpuorch.cli.app import app
from gpuorch.money.billing import BillingRule
from gpuorch.sizing import Workload
from gpuorch.sizing.fabric import UNKNOWN_FABRIC, Fabric, node_factor

GANG = """name: gang
run: torchrun train.py
nodes: 2
model: {preset: llama-3.1-8b, method: full, seq_len: 4096, micro_batch: 1, tokens: 1B}
distributed: {strategy: zero3, degree: 8}
"""


def test_a_family_without_a_published_network_has_no_fabric():
    catalog = AdapterCatalog("m", BillingRule(), families=(
        Family("m", r"A\d+$", "H100", 8, "nvlink", 0), Family("m", r"B\d+$", "H100", 8, "nvlink", 400, "infiniband")))
    assert catalog.fabric_for("A8") is None
    assert catalog.fabric_for("B8") == ("infiniband", 400)


def test_a_fabric_of_zero_gbps_is_sized_as_the_unknown_fabric():
    w = Workload(preset="llama-3.1-8b", method="full", seq_len=4096, micro_batch=1)
    zero = node_factor(w, "zero3", 2, Fabric("ethernet", 0.0), 3000.0)
    assert math.isfinite(zero) and 0 < zero < 1
    assert zero == node_factor(w, "zero3", 2, UNKNOWN_FABRIC, 3000.0)


def test_plan_of_a_two_node_job_over_the_price_list_ranks_without_an_internal_error(tmp_path):
    job = tmp_path / "gang.yaml"
    job.write_text(GANG)
    result = CliRunner().invoke(app, ["plan", str(job), "--price-list"])
    assert "internal error" not in result.output, result.output
    assert result.exit_code == 0, result.output

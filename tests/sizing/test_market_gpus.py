"""The consumer and workstation cards GPU marketplaces rent (issue 33): names users and price lists
write, datasheet numbers that rank them honestly against datacenter parts, no fast link."""

from __future__ import annotations

import pytest

from gpuorch import gpus
from gpuorch.jobs.gpu_request import GpuRequirement
from gpuorch.sizing import Workload, estimate_hours, smallest_fit

MARKET_CARDS = ("RTX4090", "RTX3090", "RTX5090", "RTXA6000", "RTX6000ADA", "RTXA5000", "RTXA4000", "L40",
                "H100-PCIE", "H100-NVL", "H200", "B200", "MI300X")


@pytest.mark.parametrize("written, name", [
    ("RTX4090", "RTX4090"), ("4090", "RTX4090"), ("rtx-4090", "RTX4090"), ("RTX 4090", "RTX4090"),
    ("rtx_4090", "RTX4090"), ("GeForce RTX 4090", "RTX4090"), ("3090", "RTX3090"), ("RTX-5090", "RTX5090"),
    ("A6000", "RTXA6000"), ("RTX A6000", "RTXA6000"), ("RTX 6000 Ada", "RTX6000ADA"), ("a5000", "RTXA5000"),
    ("RTX-A4000", "RTXA4000"), ("h100 pcie", "H100-PCIE"), ("H100_NVL", "H100-NVL"),
])
def test_common_spellings_name_one_card(written, name):
    spec = gpus.lookup(written)
    assert spec is not None and spec.name == name
    req = GpuRequirement.parse(f"{written}:2")
    assert req.count == 2 and req.matches(name)


def test_every_market_card_is_in_the_table_and_no_spelling_is_ambiguous():
    for name in MARKET_CARDS:
        assert gpus.lookup(name) is not None, name
    keys: dict[str, str] = {}
    for g in gpus.GPUS:
        for n in (g.name, *g.aliases):
            key = "".join(ch for ch in n.upper() if ch.isalnum())
            assert keys.setdefault(key, g.name) == g.name, f"{n} names two cards"


@pytest.mark.parametrize("name", ["RTX4090", "RTX3090", "RTX5090", "RTXA5000", "RTXA4000"])
def test_consumer_and_workstation_cards_are_pcie_only_gddr(name):
    g = gpus.lookup(name)
    assert g is not None and g.link == "pcie" and not g.fast_link and g.memory_type.startswith("GDDR")
    assert g.efficiency == gpus._GDDR  # the GDDR class default, as the L4 / A10 / L40S rows
    assert 0 < g.usable <= g.memory_gib and g.bandwidth_gbs > 0 and g.bf16_tflops > 0


def test_precision_support_follows_the_architecture():
    assert gpus.lookup("RTX4090").supports("fp8") and gpus.lookup("RTX5090").supports("fp8")  # Ada, Blackwell
    assert not gpus.lookup("RTX3090").supports("fp8") and gpus.lookup("RTX3090").supports("bf16")  # Ampere
    assert gpus.lookup("RTX5090").four_bit == "fp4"


def test_runtime_ranks_the_cards_by_their_datasheet_throughput():
    w = Workload(preset="llama-3-8b", method="qlora", tokens="100M")
    hours = {n: estimate_hours(w, gpus.lookup(n)) for n in ("RTX3090", "RTX4090", "RTX5090", "A100", "H100")}
    assert hours["H100"] < hours["A100"] < hours["RTX5090"] < hours["RTX4090"] < hours["RTX3090"]
    # Multi-GPU over PCIe scales worse than NVLink: 2 x 4090 is less than twice one.
    two = estimate_hours(w, gpus.lookup("RTX4090"), 2, "pcie", "none")
    assert two > hours["RTX4090"] / 2


def test_a_24gb_card_fits_an_8b_qlora_and_a_full_fine_tune_needs_several():
    card = gpus.lookup("RTX4090")
    q = smallest_fit(Workload(preset="llama-3-8b", method="qlora", seq_len=2048), card)
    assert q is not None and q.gpu_count == 1
    full = smallest_fit(Workload(preset="llama-3-8b", method="full", seq_len=2048), card)
    assert full is None or full.gpu_count > 1


def test_geforce_cards_share_the_4090s_utilisation_and_say_they_are_uncalibrated():
    """Issue 36: the GeForce class takes the RTX 4090's calibrated utilisation (only the 4090 has
    published runs); the workstation and datacenter GDDR cards keep the class default."""
    from gpuorch.sizing.runtime import UTILISATION, calibrated, utilisation

    assert {g.name for g in gpus.GPUS} >= gpus.GEFORCE
    w = Workload(preset="llama-3-8b", method="qlora")
    for g in gpus.GPUS:
        if g.name in gpus.GEFORCE:
            assert utilisation(w, g) == UTILISATION["RTX4090"] and calibrated(w, g) == (g.name == "RTX4090"), g.name
    for name in ("L4", "L40S", "A10G", "RTX6000ADA", "RTXA6000"):
        g = gpus.lookup(name)
        assert g is not None and utilisation(w, g) == g.efficiency == gpus._GDDR and not calibrated(w, g)

"""Submit-time estimates count a volume job's storage as the daemon and ``gpuorch plan`` do
(issue 33): the plan line ``submit`` shows on a terminal, the deadline check and a sweep's cost-cap
warning rank through ``submitcheck.estimate_options`` (``placement.cost.with_job`` with the
offers' providers' storage rates), not the bare GPU price.

RunPod's RTX 4090 at $0.69/h against Vast's at $0.39/h: with a 3500 GiB volume, Vast's $0.15 per
GiB-month of storage against RunPod's $0.07 outweighs the GPUs' difference (the numbers of
tests/placement/test_storage_cost.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuorch.jobs.spec import parse_spec
from gpuorch.jobs.submitcheck import estimate_options
from gpuorch.placement import candidates
from gpuorch.provider.port import Offer

pytestmark = [pytest.mark.vast]
VOLUME = {"size": "3500GB", "mount": "/data"}


def offers() -> list[Offer]:
    def one(provider: str, itype: str, price: float) -> Offer:
        return Offer(provider=provider, region="global", zone="global", instance_type=itype, gpu="RTX4090",
                     gpu_count=1, gpu_memory_gib=23.99, vcpus=8, memory_gib=64, price_per_hour=price,
                     min_billing_s=0)

    return [one("runpod", "rtx4090.1", 0.69), one("vast", "RTX4090x1", 0.39)]


def spec(volume: bool):
    return parse_spec({"name": "lora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
                       "spot_policy": "on-demand", "deadline": {"at": "2099-01-01T00:00:00Z", "job_hours": 10}}
                      | ({"volume": VOLUME} if volume else {}))


def test_the_submit_plan_line_picks_what_plan_picks_storage_counted(monkeypatch, tmp_path) -> None:
    import gpuorch.registry
    from gpuorch.cli import jobs as jobs_cli

    monkeypatch.setattr(gpuorch.registry, "offline_offers", lambda providers, home: offers())
    monkeypatch.setattr(jobs_cli, "cli_config", lambda: SimpleNamespace(providers={}, home=tmp_path))
    with_volume = jobs_cli._plan_line(spec(True))
    [best] = candidates(spec(True), offers(), limit=1, options=estimate_options(spec(True), offers()))
    assert with_volume.startswith("plan: runpod global rtx4090.1") and best.offer.provider == "runpod"
    assert f"estimated ${best.est_cost:.2f} (${best.est_storage_usd:.2f} of it the volume's storage)" in with_volume
    assert best.est_storage_usd > 0
    bare = jobs_cli._plan_line(spec(False))  # no volume: the GPU price alone decides, as before
    assert bare.startswith("plan: vast global RTX4090x1") and "storage" not in bare


def test_estimate_options_are_the_daemons_for_a_volume_job_and_none_without_one() -> None:
    opts = estimate_options(spec(True), offers())
    assert opts is not None and {p for p, _, _ in opts.storage_rates} == {"runpod", "vast"}
    assert estimate_options(spec(False), offers()) is None  # other placements stay memoised

"""``gpuorch plan`` states what each launch reserves against the caps (issue 35, item 2): the
runway, the least its guarantees need, and the horizon, at the top candidate's price."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.money.caps import Policy

ROW = {"provider": "aws", "region": "us-east-1", "zone": "us-east-1a", "instance_type": "p3.2xlarge", "gpu": "V100",
       "gpu_count": 1, "gpu_memory_gib": 16, "vcpus": 8, "memory_gib": 61, "price_per_hour": 3.06,
       "spot_price_per_hour": 0.9731, "interconnect": "", "billing_granularity_s": 1, "min_billing_s": 60}


def plan(tmp_path, checkpoint: str | None, *json_flag: str):
    catalog = tmp_path / "offers.csv"
    catalog.write_text(",".join(ROW) + "\n" + ",".join(str(v) for v in ROW.values()) + "\n")
    job = {"name": "t", "run": "true", "resources": {"gpu": "V100:16GB:1"}, "spot_policy": "spot"}
    if checkpoint:
        job["checkpoint"] = {"store": "file:///tmp/c", "interval": checkpoint}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    return CliRunner().invoke(app, ["plan", str(tmp_path / "job.yaml"), "--catalog", str(catalog), *json_flag])


def test_plan_states_the_reservation_of_a_launch(tmp_path):
    h = Policy().horizon_s  # 180 s: the next look, a clean stop, the terminating look
    r = plan(tmp_path, None, "--json")
    assert r.exit_code == 0, r.output
    reserve = json.loads(r.stdout)["reserve"]
    assert reserve["runway_s"] == 0 and reserve["horizon_s"] == h  # a 60 s minimum bill is within the horizon
    assert abs(reserve["usd"] - 0.9731 * h / 3600) < 1e-6
    r = plan(tmp_path, "60s")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("each launch reserves"))
    assert f"${0.9731 * (90 + h) / 3600:.4f}" in line and "runway 90 s (the first checkpoint" in line

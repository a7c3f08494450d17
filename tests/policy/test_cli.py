"""``gpuorch simulate policy`` through typer's runner: JSON shape, tables, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policy_helpers import TRACES
from typer.testing import CliRunner

import gpuorch.cli.simulate  # noqa: F401 - registers the commands
from gpuorch.cli.app import app

runner = CliRunner()
POLICIES = {"on-demand", "greedy", "uniform-progress", "gpuorch", "optimal"}
FIELDS = {"mean_cost", "p90_cost", "missed"}
HOURLY = ["--changeover-hours", "0.5", "--on-demand-price", "3", "--spot-price", "1"]


def write_trace(path: Path, bits: str, gap: int = 3600) -> Path:
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap}, "data": [int(b) for b in bits]}))
    return path


def run(*args: str):
    return runner.invoke(app, ["simulate", "policy", *args])


def test_json_shape_single_trace(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "a.json", "1100111100011111")
    r = run("--trace", f"a={trace}", "--job-hours", "4", "--deadline-hours", "8", *HOURLY, "--windows", "3", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"policies", "jobs"}  # one trace: nothing multi-region to report
    assert out["jobs"] == 3
    assert set(out["policies"]) == POLICIES
    for stats in out["policies"].values():
        assert set(stats) == FIELDS and stats["missed"] == 0
    assert out["policies"]["optimal"]["mean_cost"] <= out["policies"]["gpuorch"]["mean_cost"]


def test_json_shape_with_a_directory_of_real_traces() -> None:
    r = run(
        "--trace", str(TRACES), "--job-hours", "3", "--deadline-hours", "4", "--changeover-hours", "0.1",
        "--on-demand-price", "3.06", "--spot-price", "0.9731", "--windows", "2", "--seed", "5", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"policies", "multi_region", "jobs"}
    assert set(out["policies"]) == POLICIES
    assert set(out["multi_region"]) == {"gpuorch", "optimal"}
    assert all(set(s) == FIELDS for s in out["multi_region"].values())
    assert out["multi_region"]["optimal"]["mean_cost"] <= out["multi_region"]["gpuorch"]["mean_cost"]
    assert out["multi_region"]["optimal"]["mean_cost"] <= out["policies"]["optimal"]["mean_cost"]


def test_same_seed_same_numbers(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "a.json", "110011110001111101101111")
    args = ("--trace", str(trace), "--job-hours", "4", "--deadline-hours", "8", *HOURLY, "--json", "--seed", "3")
    assert run(*args).stdout == run(*args).stdout


def test_human_tables(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "east.json", "1100111100011111")
    b = write_trace(tmp_path / "west.json", "0111111111000111")
    r = run("--trace", str(a), "--trace", f"w={b}", "--job-hours", "4", "--deadline-hours", "8", *HOURLY)
    assert r.exit_code == 0, r.output
    for text in ("Single-region, all zones", "per zone", "east", "w", "Multi-region", "uniform-progress"):
        assert text in r.stdout


@pytest.mark.parametrize(
    ("trace_arg", "extra", "message"),
    [
        ("{missing}", [], "--trace"),
        ("=x.json", [], "ZONE=FILE"),
        ("zone=", [], "ZONE=FILE"),
        ("{bad}", [], "not JSON"),
        ("{good}", ["--job-hours", "-1"], "--job-hours"),
        ("{good}", ["--changeover-hours", "-0.1"], "--changeover-hours"),
        ("{good}", ["--deadline-hours", "3"], "--deadline-hours"),
        ("{good}", ["--deadline-hours", "4.2"], "--deadline-hours"),  # no room for a changeover
        ("{good}", ["--deadline-hours", "40"], "shorter deadline"),
        ("{good}", ["--windows", "0"], "--windows"),
        ("z={dir}", [], "directory takes no ZONE"),
    ],
)
def test_errors_are_one_line_naming_the_flag(tmp_path: Path, trace_arg: str, extra: list[str], message: str) -> None:
    good = write_trace(tmp_path / "good.json", "1" * 16)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    arg = trace_arg.format(missing=tmp_path / "nope.json", bad=bad, good=good, dir=tmp_path)
    flags = {"--job-hours": "4", "--deadline-hours": "8", **dict(zip(HOURLY[::2], HOURLY[1::2], strict=True))}
    flags.update(zip(extra[::2], extra[1::2], strict=True))
    r = run("--trace", arg, *(x for kv in flags.items() for x in kv))
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr

"""Issue 16, items 3 and 6: a sweep parameter never runs as shell code, and bad sweep files are
refused in one line."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

import pytest

from gpuorch.errors import UserInputError
from gpuorch.sweeps.command import substitute
from gpuorch.sweeps.spec import load_sweep, parse_sweep

NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOB = {"run": "echo {X}"}


def sweep(**kw) -> dict:
    return {"name": "s", "job": dict(JOB), "parameters": {"X": ["a"]}, **kw}


@pytest.mark.parametrize("run", ["echo '{X}'", "echo $'{X}'"])  # where nothing expands (issue 31: "..." is fine)
def test_a_parameter_inside_quotes_is_refused(run, tmp_path):
    marker = tmp_path / "marker"
    with pytest.raises(UserInputError, match=r"job\.run: \{X\} is inside .*env var X") as e:
        parse_sweep(sweep(job={"run": run}, parameters={"X": [f"$(touch {marker})"]}), "s.yaml", NOW)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("run", ["printf %s {X}", "printf %s \"$X\" && printf %s {X} | cat", "printf '%s' {X}",
                                 'echo "{X}"', 'echo "a $(echo {X})"', "cat <<EOF\n{X}\nEOF"])
def test_an_accepted_substitution_never_runs_the_value(run, tmp_path):
    marker = tmp_path / "marker"
    value = f"$(touch {marker})`touch {marker}`'\"; touch {marker}"
    cmd = substitute(run, {"X": value})
    subprocess.run(["/bin/bash", "-c", cmd], env={"X": value, "PATH": "/usr/bin:/bin"}, check=True,
                   capture_output=True)
    assert not marker.exists()


@pytest.mark.parametrize("params, field", [
    ({"X": {"int": [0.2, 0.8]}}, "X"),
    ({"X": {"int": [0, float("inf")]}}, "parameters"),
    ({"X": {"int": [float("nan"), 3]}}, "parameters"),
    ({"X": {"uniform": [0, float("inf")]}}, "parameters"),
    ({"X": [float("nan")]}, "parameters"),
    ({"X": ["a\0b"]}, "NUL"),
])
def test_bad_parameter_ranges_are_refused_in_one_line(params, field):
    with pytest.raises(UserInputError) as e:
        parse_sweep(sweep(parameters=params, search={"method": "random", "count": 2}), "s.yaml", NOW)
    assert "\n" not in str(e.value) and field in str(e.value)


def test_a_huge_deadline_is_refused_in_one_line():
    with pytest.raises(UserInputError, match="deadline"):
        parse_sweep(sweep(deadline="100000000000000000000h"), "s.yaml", NOW)


def test_sweep_files_refuse_duplicate_keys_and_aliases(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nname: t\njob: {run: x}\nparameters: {X: [1]}\n")
    with pytest.raises(UserInputError, match="twice"):
        load_sweep(p, NOW)
    p.write_text("name: s\njob: &j {run: x}\nparameters: {X: [1]}\nother: *j\n")
    with pytest.raises(UserInputError, match="alias"):
        load_sweep(p, NOW)

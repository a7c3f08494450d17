"""Sweep files: the parameter space, safe substitution into `run`, metrics lines."""

from __future__ import annotations

import subprocess

import pytest

from gpuorch.sweeps.command import substitute
from gpuorch.sweeps.metrics import merge_lines
from gpuorch.sweeps.spec import SweepSpec, points

HOSTILE = "x'; touch /tmp/pwned; echo '$(id)"


def test_substitution_references_the_env_var_and_leaves_shell_syntax_alone():
    cmd = substitute("echo {LR} ${LR} $LR {unknown} {{LR}}", {"LR"})
    assert cmd == 'echo "${LR}" ${LR} $LR {unknown} {{LR}}'  # the value is never in the text (issue 31)
    out = subprocess.run(["/bin/bash", "-c", substitute("printf %s {LR}", {"LR"})], env={"LR": HOSTILE},
                         capture_output=True, text=True, check=True).stdout
    assert out == HOSTILE  # one argument, never interpreted


def test_grid_order_and_seeded_random_draws():
    grid = SweepSpec(name="g", job={}, parameters={"A": [1, 2], "B": ["x", "y"]})
    # interleaved (gpuorch.sweeps.grid): the first two trials already try both values of each
    assert points(grid) == [{"A": 1, "B": "x"}, {"A": 2, "B": "y"}, {"A": 1, "B": "y"}, {"A": 2, "B": "x"}]
    rnd = SweepSpec(name="r", job={}, parameters={"LR": {"loguniform": [1e-4, 1e-1]}, "B": [True, False]},
                    search={"method": "random", "count": 20, "seed": 5})
    first, again = points(rnd), points(rnd)
    assert first == again and all(1e-4 <= p["LR"] <= 1e-1 and isinstance(p["B"], bool) for p in first)


@pytest.mark.parametrize("params, error", [
    ({"lr-x": [1]}, "not a usable variable name"),
    ({"GPUORCH_X": [1]}, "not a usable variable name"),
    ({"LR": {"normal": [0, 1]}}, "write a list of values"),
    ({"LR": {"loguniform": [0, 1]}}, "low > 0"),
])
def test_bad_parameters(params, error):
    with pytest.raises(ValueError, match=error):
        SweepSpec(name="s", job={}, parameters=params, search={"method": "random", "count": 1})


def test_metrics_lines_merge_latest_values_and_skip_junk():
    data = b'{"step": 1, "loss": 2.0}\nnot json\n[1, 2]\n{"step": 2, "loss": NaN, "acc": 0.5, "tag": "a"}\n'
    assert merge_lines({"old": 1}, data) == {"old": 1, "step": 2, "loss": 2.0, "acc": 0.5, "tag": "a"}
    assert merge_lines({"step": 2}, b'{"step": 2}\n') is None  # nothing changed

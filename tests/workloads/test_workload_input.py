"""Bad ``image:`` and ``nodes:`` input: one line naming the field and the fix, exit 2, nothing stored."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app

runner = CliRunner()


def submit(tmp_path, config=None, **extra):
    doc = {"name": "train", "run": "python3 train.py", **extra}
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(doc))
    args = ["submit", str(spec)]
    if config is not None:
        cfg = tmp_path / "config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        args = ["--config", str(cfg), *args]
    return runner.invoke(app, args)


def stored():
    return json.loads(runner.invoke(app, ["status", "--json"]).output)["jobs"]


def refused(r, *needles):
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    for needle in needles:
        assert needle in line, line
    assert stored() == []


@pytest.mark.parametrize("nodes", [0, -2])
def test_nodes_below_one(tmp_path, nodes):
    refused(submit(tmp_path, nodes=nodes), "nodes: must be at least 1")


def test_more_nodes_than_any_enabled_provider_places(tmp_path):
    refused(submit(tmp_path, nodes=9), "nodes: 9 nodes", "(local)", "place at most 8 per job; use nodes: 8")


def test_nodes_on_providers_without_multi_node(tmp_path):
    r = submit(tmp_path, config={"providers": {"local": {}, "sim": {}}}, nodes=2, providers=["sim"])
    refused(r, "nodes: 2 nodes, but the providers this job may use (sim) place at most 1 per job; use nodes: 1")


def test_a_gang_on_the_local_provider_is_queued(tmp_path):
    r = submit(tmp_path, nodes=2, resources={"gpu": "A100:80GB:1"})
    assert r.exit_code == 0, r.output
    assert stored()[0]["name"] == "train"


@pytest.mark.parametrize("image", ["Ubuntu:22.04", "ubuntu:22.04 && rm -rf /", "ghcr.io/org/img@sha256:xyz", ""])
def test_an_image_reference_that_does_not_parse(tmp_path, image):
    refused(submit(tmp_path, image=image), "image: ", "image reference")


def test_an_image_on_providers_that_cannot_run_containers(tmp_path):
    r = submit(tmp_path, config={"providers": {"local": {}, "sim": {}}}, image="localhost/base", providers=["sim"])
    refused(r, "image: the providers this job may use (sim) cannot run containers", "allow one that can (local)")


def test_an_image_job_on_a_provider_that_runs_containers_is_queued(tmp_path):
    r = submit(tmp_path, image="ghcr.io/org/train:1.2")
    assert r.exit_code == 0, r.output
    [job] = stored()
    assert job["name"] == "train"


def test_a_sweep_whose_template_has_more_nodes_than_any_provider_places_is_refused(tmp_path):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({"name": "t", "run": "python3 train.py", "nodes": 12}))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "job": "job.yaml", "parameters": {"LR": [0.1, 0.2]},
                                     "budget": {"max_cost": 5}}))
    r = runner.invoke(app, ["sweep", "submit", str(sweep)])
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert "nodes: 12 nodes" in line and "use nodes: 8" in line
    assert json.loads(runner.invoke(app, ["sweep", "status", "--json"]).output) == []  # nothing stored


def test_submits_plan_prices_a_gang_for_every_node():
    from gpuorch.cli.jobs import _plan_line
    from gpuorch.jobs.spec import parse_spec

    one = parse_spec({"name": "t", "run": "x", "resources": {"gpu": "A100:80GB:1"}})
    two = parse_spec({"name": "t", "run": "x", "resources": {"gpu": "A100:80GB:1"}, "nodes": 2})

    def price(line: str) -> float:
        return float(line.split(" at $")[1].split("/h")[0])

    assert " 2 x " in _plan_line(two) and " 2 x " not in _plan_line(one)
    assert price(_plan_line(two)) == pytest.approx(2 * price(_plan_line(one)), rel=1e-3)


def test_a_distributed_strategy_that_contradicts_nodes(tmp_path):
    r = submit(tmp_path, nodes=2, distributed={"strategy": "none"}, resources={"gpu": "A100:80GB:1"})
    refused(r, "distributed: strategy none runs on one GPU, but nodes: 2 asks for 2 instances", "or use nodes: 1")


def test_a_gang_with_a_strategy_that_spans_it_is_queued(tmp_path):
    r = submit(tmp_path, nodes=2, distributed={"strategy": "ddp"}, resources={"gpu": "A100:80GB:2"})
    assert r.exit_code == 0, r.output

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
    refused(submit(tmp_path, nodes=2), "nodes: 2 nodes", "(local)", "use nodes: 1")


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

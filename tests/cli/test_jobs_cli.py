"""The job commands through typer's runner, against a real SQLite store under $GPUORCH_HOME."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuorch.checkpoint import STORE_PLUGINS
from gpuorch.cli import app

runner = CliRunner()

GOOD = """\
name: tiny
run: python3 -c 'print(1)'
resources: {gpu: "A100:80GB:1"}
checkpoint: {store: "file:///tmp/ckpt"}
"""


def cli(*args):
    return runner.invoke(app, list(args))


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(GOOD)
    return p


def test_submit_then_status_json(spec):
    r = cli("submit", str(spec), "--json")
    assert r.exit_code == 0, r.output
    job = json.loads(r.output)
    assert job["status"] == "queued"
    rows = json.loads(cli("status", "--json").output)["jobs"]
    assert [(j["id"], j["name"], j["status"], j["attempts"]) for j in rows] == [(job["id"], "tiny", "queued", 0)]
    detail = json.loads(cli("status", "tiny", "--json").output)
    assert detail["attempt_list"] == [] and detail["cost"] == 0
    kinds = [e["kind"] for e in json.loads(cli("events", "--json").output)]
    assert kinds == ["submitted"]


@pytest.mark.parametrize(
    "body, field",
    [
        (GOOD + "colour: blue\n", "colour"),
        (GOOD.replace("A100:80GB:1", "Z900"), "resources.gpu"),
        (GOOD + "max_price_per_hour: -2\n", "max_price_per_hour"),
        (GOOD.replace("file:///tmp/ckpt", "ftp://host/ckpt"), "checkpoint.store"),
        ("name: [\n", "malformed YAML"),
    ],
)
def test_bad_spec_exits_2_with_one_line_and_writes_nothing(tmp_path, spec, body, field):
    cli("submit", str(spec))
    bad = tmp_path / "bad.yaml"
    bad.write_text(body)
    r = cli("submit", str(bad))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0]
    assert len(json.loads(cli("status", "--json").output)["jobs"]) == 1  # the earlier job is intact, nothing added


@pytest.mark.parametrize("cmd", ["logs", "cancel", "status", "events"])
def test_unknown_job_exits_3(cmd):
    r = cli(cmd, "42")
    assert r.exit_code == 3 and "no job '42'" in r.output


def test_cancel_marks_intent_only(spec):
    job = json.loads(cli("submit", str(spec), "--json").output)
    r = cli("cancel", str(job["id"]), "--json")
    assert r.exit_code == 0 and json.loads(r.output)["cancel_requested"] is True
    assert json.loads(cli("status", str(job["id"]), "--json").output)["status"] == "queued"  # the daemon acts


def test_submit_refuses_a_job_no_gpu_configuration_can_hold(tmp_path):
    p = tmp_path / "huge.yaml"
    p.write_text("name: huge\nrun: python train.py\nmodel: {params: 400B, method: full}\n")
    r = cli("submit", str(p))
    assert r.exit_code == 2 and "enough GPU memory" in r.output and "missing" in r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []


@pytest.mark.parametrize("body, message", [
    ("resources: {gpu: 'H100:16'}", "asks for 16 H100 on one instance; no instance has more than 8"),
    ("model: {params: 120B, method: full, activation_checkpointing: full}\ndistributed: {strategy: zero3}",
     " nodes of 8x"),  # the count and GPU follow the catalog
])
def test_submit_refuses_a_job_only_several_nodes_could_hold(tmp_path, body, message):
    p = tmp_path / "multi.yaml"
    p.write_text(f"name: multi\nrun: python train.py\n{body}\n")
    r = cli("submit", str(p))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert message in r.output and "unless it asks for a gang with nodes: N" in r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []


def test_submit_derives_the_gpu_from_a_model_block_with_the_planner(tmp_path):
    p = tmp_path / "ft.yaml"
    p.write_text("name: ft\nrun: python train.py\nmodel: {params: 8B, method: qlora, seq_len: 2048}\n")
    r = cli("submit", str(p), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["warning"] is None  # the local market has GPUs that hold it


def test_submit_queues_with_a_warning_when_no_enabled_offer_fits(tmp_path):
    p = tmp_path / "elsewhere.yaml"
    p.write_text("name: elsewhere\nrun: x\nresources: {gpu: T4}\nregions: [mars-1]\n")
    r = cli("submit", str(p), "--json")
    assert r.exit_code == 0 and "stays queued" in json.loads(r.output)["warning"]


def test_a_model_job_restricted_to_a_region_without_offers_is_queued_not_refused(tmp_path):
    p = tmp_path / "ft.yaml"
    p.write_text("name: ft\nrun: x\nmodel: {params: 8B, method: qlora}\nregions: [mars-1]\n")
    r = cli("submit", str(p), "--json")
    assert r.exit_code == 0 and "stays queued" in json.loads(r.output)["warning"]


def test_submit_accepts_an_az_checkpoint_store(tmp_path):
    p = tmp_path / "az.yaml"
    p.write_text(GOOD.replace("file:///tmp/ckpt", "az://ckpt@myaccount/runs"))
    r = cli("submit", str(p), "--json")  # nothing is reached at submit: the store is the agent's
    assert r.exit_code == 0, r.output
    assert [j["name"] for j in json.loads(cli("status", "--json").output)["jobs"]] == [json.loads(r.output)["name"]]


def test_submit_refuses_a_checkpoint_store_whose_module_is_missing(tmp_path, monkeypatch):
    """A scheme the spec knows but this installation cannot write (its store module is absent) is
    refused at submit, not discovered by the agent on a paid instance."""
    monkeypatch.setitem(STORE_PLUGINS.table, "az", "gpuorch_azure.not_here:AzureBlobStore")
    p = tmp_path / "unshipped.yaml"
    p.write_text(GOOD.replace("file:///tmp/ckpt", "az://container@acct/runs"))
    r = cli("submit", str(p))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "checkpoint.store: az:// checkpoint stores are not implemented in this gpuorch yet" in r.output
    assert json.loads(cli("status", "--json").output)["jobs"] == []


def test_submit_on_a_terminal_shows_the_plan_and_asks(spec, monkeypatch):
    from gpuorch.cli import jobs as jobs_cli

    monkeypatch.setattr(jobs_cli, "_interactive", lambda: True)  # CliRunner's stdin is no terminal
    r = runner.invoke(app, ["submit", str(spec)], input="n\n")
    assert r.exit_code == 1 and "not queued" in r.stderr
    [plan] = [line for line in r.stdout.splitlines() if line.startswith("plan: ")]
    assert "A100" in plan and "/h" in plan and ("spot" in plan or "on-demand" in plan)
    assert json.loads(cli("status", "--json").output)["jobs"] == []  # declined: nothing stored
    r = runner.invoke(app, ["submit", str(spec)], input="y\n")
    assert r.exit_code == 0 and "queued" in r.stdout
    r = runner.invoke(app, ["submit", "-y", str(spec)])  # -y: no question
    assert r.exit_code == 0 and "plan:" not in r.stdout and "Queue it?" not in r.stdout
    assert len(json.loads(cli("status", "--json").output)["jobs"]) == 2


def test_submit_never_asks_when_stdin_is_not_a_terminal(spec):
    r = cli("submit", str(spec))  # CliRunner: stdin is not a terminal
    assert r.exit_code == 0 and "Queue it?" not in r.output and "plan:" not in r.output


def test_logs_json_is_one_object_per_line(spec, _isolated_home):
    from gpuorch.jobs.logmirror import LogMirror

    job = json.loads(cli("submit", str(spec), "--json").output)
    from gpuorch.store import Store
    from gpuorch.store.models import Attempt
    from gpuorch.store.paths import default_url

    store = Store(default_url())
    with store.write() as s:  # an attempt whose output the daemon has mirrored
        s.add(Attempt(job_id=job["id"], number=1, provider="local", region="r", zone="z", instance_type="t"))
    store.close()
    p = LogMirror(_isolated_home).path(job["id"], 1)
    p.parent.mkdir(parents=True)
    p.write_bytes("step 1\nstep 2 é\nno newline".encode())
    r = cli("logs", str(job["id"]), "--json")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines == [{"job": job["id"], "attempt": 1, "line": t} for t in ("step 1", "step 2 é", "no newline")]

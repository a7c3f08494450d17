"""Notifications through the assembled daemon (``AssembledDaemon.start(home, {"notifications":
...})``): the reconciler as ``gpuorch daemon`` builds it and the sender ``gpuorch daemon``
starts (``notify.sender.from_config``), turned between passes here instead of on its thread.
A job that fails reaches a real receiver (verifying with ``standardwebhooks``) with its exit
code and last log lines; a sweep that finishes sends one morning report, best trial first, with
its spend against the cap."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.notify.sender import from_config
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.notify, pytest.mark.timeout(300)]


def _config(receiver, tmp_path, secret, **route):
    key = tmp_path / "webhook.key"
    key.write_text(secret)
    return {"notifications": {"webhooks": [{"url": receiver.url, "secret_file": str(key), **route}]}}


def _rows(trials: list[dict]) -> list[list[object]]:
    """What a report says of each trial (not runtime_s: the billed record may be corrected after a send)."""
    return [[t[k] for k in ("id", "params", "value", "cost", "status")] for t in trials]


def _types(receiver) -> list[str]:
    return [r.verified["type"] for r in receiver.ok()]


def test_a_failed_job_is_told_with_its_exit_code_and_last_log_lines(tmp_path, receiver, secret):
    with AssembledDaemon.start(tmp_path / "home", _config(receiver, tmp_path, secret,
                                                          events=["job.failed", "job.succeeded"])) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        job = d.submit({"name": "boom", "run": "echo step 1; echo 'loss went NaN' >&2; exit 3",
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        ok = d.submit({"name": "fine", "run": "true", "resources": {"gpu": "A100:80GB:1"},
                       "spot_policy": "on-demand"})
        d.until(lambda: (sender.tick(), sorted(_types(receiver)) == ["job.failed", "job.succeeded"])[1],
                what="both jobs' notifications")
    failed = next(r.verified for r in receiver.ok() if r.verified["type"] == "job.failed")
    assert failed["data"]["job"]["id"] == job and failed["data"]["job"]["exit_code"] == 3
    assert "loss went NaN" in "\n".join(failed["data"]["job"]["log_tail"])
    assert "exit code 3" in failed["chat"]["text"]
    succeeded = next(r.verified for r in receiver.ok() if r.verified["type"] == "job.succeeded")
    assert succeeded["data"]["job"]["id"] == ok
    assert len({r.id for r in receiver.ok()}) == 2  # one id per event


def test_a_finished_sweep_sends_one_morning_report(tmp_path, receiver, secret, monkeypatch):
    losses = {"0.1": 0.9, "0.01": 0.2, "0.001": 0.5}
    run = ("python3 -c \"import json,os; lr=os.environ['LR']; "
           f"loss={losses!r}[lr]; open(os.environ['GPUORCH_METRICS_FILE'],'a').write(json.dumps("
           "{'step': 10, 'loss': loss})+chr(10))\"")
    sweep = {"name": "lr-scan", "max_parallel": 3, "budget": {"max_cost": 5.0}, "parameters": {"LR": list(losses)},
             "objective": {"metric": "loss", "mode": "min"},
             "job": {"run": run, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    with AssembledDaemon.start(tmp_path / "home", _config(receiver, tmp_path, secret,
                                                          events=["sweep.finished"])) as d:
        sender = from_config(d.config)(d.store, d.rec.owner)
        sweep_id = d.submit_sweep(path)["id"]
        d.until(lambda: (sender.tick(), _types(receiver))[1], what="the sweep's report")
        for _ in range(3):  # nothing more comes: one message per sweep
            d.run_pass()
            sender.tick()
    [got] = receiver.ok()
    doc = got.verified
    assert doc["type"] == "sweep.finished"
    report = doc["data"]["sweep"]
    assert report["id"] == sweep_id and report["counts"] == {"succeeded": 3}
    assert [t["params"]["LR"] for t in report["trials"]] == ["0.01", "0.001", "0.1"]  # best first
    assert report["best"]["value"] == 0.2 and report["max_cost_usd"] == 5.0
    text = doc["data"]["report"]["text"]
    assert text.index("LR=0.01") < text.index("LR=0.001") < text.index("LR=0.1")
    assert "of $5.00 cap" in text and "Preemptions survived: 0" in text
    assert "| # | trial |" in doc["data"]["report"]["markdown"]
    assert doc["data"]["event"]["sweep_id"] == sweep_id  # the event names its sweep
    # gpuorch sweep report: the same report, as text, Markdown and JSON; --json with --markdown is refused
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "home"))
    cli = CliRunner()
    out = [cli.invoke(app, ["sweep", "report", "lr-scan", *flag]) for flag in ([], ["--markdown"], ["--json"])]
    assert [r.exit_code for r in out] == [0, 0, 0], [r.output for r in out]
    assert out[0].stdout.strip() == text and out[1].stdout.strip() == doc["data"]["report"]["markdown"]
    as_data = json.loads(out[2].stdout)
    assert _rows(as_data["sweep"]["trials"]) == _rows(report["trials"])
    assert as_data["text"] == text
    both = cli.invoke(app, ["sweep", "report", "lr-scan", "--json", "--markdown"])
    assert both.exit_code == 2 and both.stderr.startswith("error: --json, --markdown:")
    missing = cli.invoke(app, ["sweep", "report", "no-such-sweep"])
    assert missing.exit_code == 3 and len(missing.stderr.strip().splitlines()) == 1

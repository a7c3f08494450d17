"""Sweeps through the HTTP API: ``gpuorch --server URL sweep submit|status|cancel`` against a real
server on 127.0.0.1 and a real SQLite store. The "laptop" (the CLI) has a state directory of its
own, so a sweep that lands anywhere but the server's store is caught; the server checks a sweep
as a local submit does (``JobService.sweep_submit``) and the CLI prints the same bytes either way.

Bare Reconciler: it works on the API server fixture's store (server_store), where the remote
submit landed; the API is what is under test.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import yaml
from sqlmodel import select

from gpuorch.api.client import Client, RemoteRefused
from gpuorch.clock import utcnow
from gpuorch.errors import UserInputError
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Job, Sweep
from gpuorch.sweeps.spec import load_sweep, remote_request
from gpuorch.testing import wait_until
from gpuorch_local.provider import LocalProvider

JOB = {"run": "python3 train.py {LR}", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
       "workdir": "src"}
INLINE = {k: v for k, v in JOB.items() if k != "workdir"}  # a template sent inline, no workdir
SWEEP = {"name": "lr", "job": "job.yaml", "parameters": {"LR": [0.1, 0.2]}, "max_parallel": 2,
         "budget": {"max_cost": 5}, "deadline": "8h", "objective": {"metric": "loss", "mode": "min"}}
TRAIN = ("import json, os, sys\n"
         "with open(os.environ['GPUORCH_METRICS_FILE'], 'a') as f:\n"
         "    f.write(json.dumps({'loss': float(sys.argv[1]) * 10}) + '\\n')\n")


@pytest.fixture
def laptop(tmp_path, monkeypatch):
    """The CLI's own state directory from here on (the server keeps the one it started with)."""
    d = tmp_path / "laptop-home"
    d.mkdir()
    monkeypatch.setenv("GPUORCH_HOME", str(d))
    return d


@pytest.fixture
def on_server(home, monkeypatch, local):
    """Run the CLI locally on the server's own store (to compare with what --server prints)."""
    def run(*args: str):
        with monkeypatch.context() as m:
            m.setenv("GPUORCH_HOME", str(home))
            return local(*args)

    return run


def sweep_file(tmp_path, sweep=None, job=None):
    d = tmp_path / "work"
    (d / "src").mkdir(parents=True, exist_ok=True)
    (d / "src" / "train.py").write_text(TRAIN)
    (d / "job.yaml").write_text(yaml.safe_dump(JOB if job is None else job))
    p = d / "sweep.yaml"
    p.write_text(yaml.safe_dump(SWEEP if sweep is None else sweep))
    return p


def stored(store):
    with store.read() as s:
        return list(s.exec(select(Sweep))), list(s.exec(select(Job)))


def uploads_of(home):
    u = home / "uploads"
    return sorted(u.iterdir()) if u.exists() else []


def test_a_remote_sweep_lands_in_the_servers_store_and_its_trials_run_the_upload(
        api, remote, on_server, laptop, home, server_store, tmp_path):
    r = remote("sweep", "submit", str(sweep_file(tmp_path)), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"id": 1, "name": "lr", "trials": 2, "status": "active", "warning": None}
    sweeps, jobs = stored(server_store)
    assert [w.name for w in sweeps] == ["lr"] and [j.name for j in jobs] == ["lr-0", "lr-1"]
    assert {j.sweep_id for j in jobs} == {sweeps[0].id}
    [upload] = uploads_of(home)
    assert (upload / "train.py").read_text() == TRAIN
    assert {json.loads(j.spec)["workdir"] for j in jobs} == {str(upload)}  # the server's copy, not the laptop's
    assert not (laptop / "state.db").exists()  # nothing went to the laptop's own store

    rec = Reconciler(server_store, {"local": LocalProvider(tmp_path / "local")}, settings=Settings(poll_s=0.1),
                     logs=LogMirror(home))

    def finished():
        rec.run_pass()
        return json.loads(remote("sweep", "status", "lr", "--json").output)["status"] == "done"

    wait_until(finished, timeout_s=90, step_s=0.1, what="the remotely submitted sweep to finish")
    report = json.loads(remote("sweep", "status", "lr", "--json").output)
    assert [(t["name"], t["status"], t["metrics"]) for t in report["trials"]] == [
        ("lr-0", "succeeded", {"loss": 1.0}), ("lr-1", "succeeded", {"loss": 2.0})]
    assert report["best"]["name"] == "lr-0" and report["deadline"] is not None
    for cmd in (["sweep", "status", "lr", "--json"], ["sweep", "status", "1"], ["sweep", "status", "--json"],
                ["sweep", "status"]):
        there, here = remote(*cmd), on_server(*cmd)
        assert there.exit_code == here.exit_code == 0 and there.output == here.output  # the same bytes


def test_remote_status_and_cancel_match_the_local_commands(api, remote, on_server, laptop, server_store, tmp_path):
    p = sweep_file(tmp_path, {**SWEEP, "job": INLINE})  # an inline template, no workdir
    out = remote("sweep", "submit", str(p))
    assert out.exit_code == 0
    assert out.output == "sweep 1 (lr): 2 trials queued; follow it with `gpuorch sweep status lr`\n"
    text = remote("sweep", "status", "lr")
    assert text.exit_code == 0 and "sweep 1 lr: active; spent $0.0000 of $5.00; deadline" in text.output
    assert text.output == on_server("sweep", "status", "lr").output
    r = remote("sweep", "cancel", "lr", "--json")
    assert r.exit_code == 0 and json.loads(r.output) == {"id": 1, "name": "lr", "status": "cancelled",
                                                          "trials_cancelled": 2}
    _, jobs = stored(server_store)
    assert all(j.cancel_requested for j in jobs)
    again = remote("sweep", "cancel", "lr")
    expected = "sweep 1 (lr): cancelled; 0 unfinished trials to stop\n"
    assert again.output == on_server("sweep", "cancel", "lr").output == expected
    assert not (laptop / "state.db").exists()


@pytest.mark.parametrize("cmd", [["sweep", "status", "nope"], ["sweep", "cancel", "nope"], ["sweep", "status", "7"]])
def test_unknown_sweeps_give_the_same_line_remote_and_local_and_404(api, token, remote, on_server, laptop, cmd):
    there, here = remote(*cmd), on_server(*cmd)
    assert there.exit_code == here.exit_code == 3 and there.output == here.output
    assert there.output.startswith(f"error: sweep: no sweep '{cmd[-1]}'")
    req = urllib.request.Request(f"{api.url}/v1/sweeps/{cmd[-1]}", headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 404


@pytest.mark.parametrize("change, field", [
    ({"parameters": {}}, "parameters"),
    ({"objective": {"metric": "loss", "mode": "maximize"}}, "objective.mode"),
    ({"deadline": "2020-01-01T08:00"}, "deadline"),
    ({"max_parallel": 0}, "max_parallel"),
    ({"search": {"method": "random"}}, "search.count"),
    ({"job": {"run": "x", "resources": {"gpu": "Z900"}}}, "resources.gpu"),
])
def test_a_bad_sweep_is_refused_with_one_line_exit_2_and_nothing_stored(api, token, remote, laptop, home,
                                                                         server_store, tmp_path, change, field):
    p = sweep_file(tmp_path, {**SWEEP, **change})
    r = remote("sweep", "submit", str(p))
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and field in lines[0], r.output
    with pytest.raises(UserInputError) as here:
        load_sweep(p, utcnow())
    assert lines[0] == f"error: {here.value}"
    # a client that skips the local check gets the same line from the server (422), and nothing is kept
    data, workdir = remote_request(p)  # what the CLI would send, had it not checked first
    with pytest.raises(RemoteRefused) as there:
        Client(api.url, token).sweep_submit_raw(data, str(p), workdir)
    assert str(there.value) == str(here.value)
    assert stored(server_store) == ([], []) and uploads_of(home) == []


def test_a_deadline_on_demand_cannot_meet_is_refused_by_the_server_and_its_upload_removed(
        remote, on_server, laptop, home, server_store, tmp_path):
    job = JOB | {"deadline": {"at": "30d", "job_hours": 3}}
    p = sweep_file(tmp_path, {**SWEEP, "deadline": "2h"}, job)
    there = remote("sweep", "submit", str(p))  # the laptop has no providers: only the server checks this
    assert there.exit_code == 2 and "deadline: cannot be met even on on-demand" in there.output
    assert there.output == on_server("sweep", "submit", str(p)).output and there.output.count("\n") == 1
    assert stored(server_store) == ([], []) and uploads_of(home) == []  # unpacked, refused, removed
    p = sweep_file(tmp_path, {**SWEEP, "deadline": "20h"}, job)
    assert remote("sweep", "submit", str(p)).exit_code == 0 and len(uploads_of(home)) == 1


def test_a_name_still_active_is_refused_and_the_second_upload_removed(remote, laptop, home, server_store, tmp_path):
    p = sweep_file(tmp_path)
    assert remote("sweep", "submit", str(p)).exit_code == 0
    again = remote("sweep", "submit", str(p))
    assert again.exit_code == 2 and "name: sweep 'lr' is still active" in again.output
    sweeps, jobs = stored(server_store)
    assert len(sweeps) == 1 and len(jobs) == 2 and len(uploads_of(home)) == 1


def post(api, token, body) -> tuple[int, str]:
    req = urllib.request.Request(f"{api.url}/v1/sweeps", data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]


def test_the_server_takes_no_path_of_the_submitting_machine(api, token, server_store):
    code, err = post(api, token, {"spec": {**SWEEP, "job": "job.yaml"}, "source": "s.yaml"})
    assert code == 422 and err.startswith("s.yaml: job: a path on the submitting machine") and "\n" not in err
    code, err = post(api, token, {"spec": {**SWEEP, "job": JOB}, "source": "s.yaml"})
    assert code == 422 and err.startswith("s.yaml: job.workdir: a path on the submitting machine")
    code, err = post(api, token, {"spec": {**SWEEP, "job": INLINE}, "workdir_tar": "%%%"})
    assert code == 422 and err.startswith("workdir_tar: not base64")
    code, err = post(api, token, {"spec": "name: lr"})
    assert code == 422 and err.startswith("request: body.spec")
    assert stored(server_store) == ([], [])
    code, body = post(api, token, {"spec": {**SWEEP, "job": INLINE, "deadline": "8h"}})
    assert code == 201 and body["trials"] == 2


def test_a_yaml_timestamp_deadline_travels(remote, server_store, laptop, tmp_path):
    p = sweep_file(tmp_path)
    p.write_text(p.read_text().replace("deadline: 8h", "deadline: 2099-01-01 08:00:00"))  # a datetime to YAML
    r = remote("sweep", "submit", str(p))
    assert r.exit_code == 0, r.output
    [sweep], _ = stored(server_store)
    assert sweep.deadline.replace(tzinfo=None).isoformat() == "2099-01-01T08:00:00"


@pytest.mark.parametrize("cmd", [["sweep", "status"], ["sweep", "status", "lr"], ["sweep", "cancel", "lr"],
                                 ["sweep", "status", "--json"]])
def test_sweep_commands_need_the_token(remote, cmd, laptop):
    for token, why in [("wrong-token-" + "z" * 20, "the API token was not accepted"), (None, "missing API token")]:
        r = remote(*cmd, token=token)
        lines = r.output.strip().splitlines()
        assert r.exit_code == 4 and len(lines) == 1 and lines[0].startswith("error: http://127.0.0.1:"), r.output
        assert why in lines[0]


def test_a_sweep_with_a_wrong_token_queues_nothing_and_keeps_no_upload(api, remote, laptop, home, server_store,
                                                                      tmp_path):
    r = remote("sweep", "submit", str(sweep_file(tmp_path)), token="nope-" + "n" * 20)
    assert r.exit_code == 4 and "not accepted" in r.output
    assert stored(server_store) == ([], []) and uploads_of(home) == []
    assert not (laptop / "state.db").exists()
    for method, path in [("GET", "/v1/sweeps"), ("GET", "/v1/sweeps/lr"), ("POST", "/v1/sweeps/lr/cancel"),
                         ("POST", "/v1/sweeps")]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(f"{api.url}{path}", method=method, data=b"{}"
                                                          if method == "POST" else None), timeout=30)
        assert e.value.code == 401, path


def test_remote_update_and_resume_change_the_servers_sweep_as_the_local_commands_do(
        remote, on_server, laptop, server_store, tmp_path):
    assert remote("sweep", "submit", str(sweep_file(tmp_path, {**SWEEP, "job": INLINE}))).exit_code == 0
    r = remote("sweep", "update", "lr", "--budget", "9.5", "--deadline", "12h", "--json")
    assert r.exit_code == 0, r.output
    [sweep], _ = stored(server_store)
    assert sweep.max_cost == 9.5  # the server's store, resolved against the server's clock
    moved = sweep.deadline.replace(tzinfo=None) - utcnow().replace(tzinfo=None)
    assert 11.9 * 3600 < moved.total_seconds() <= 12 * 3600
    there, here = remote("sweep", "update", "lr", "--budget", "7"), on_server("sweep", "update", "lr", "--budget", "8")
    assert there.exit_code == here.exit_code == 0
    assert there.output.replace("$7.00", "$8.00") == here.output  # the same line, remote or local
    r = remote("sweep", "resume", "lr")
    assert r.exit_code == 2 and r.output == on_server("sweep", "resume", "lr").output
    assert r.output.count("\n") == 1 and "is still active" in r.output
    assert remote("sweep", "cancel", "lr").exit_code == 0
    r = remote("sweep", "resume", "lr", "--budget", "6", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["trials_resumed"] == 2 and json.loads(r.output)["max_cost"] == 6
    [sweep], jobs = stored(server_store)
    assert sweep.status.value == "active" and not any(j.cancel_requested for j in jobs)
    assert not (laptop / "state.db").exists()


@pytest.mark.parametrize(("args", "field"), [
    (["--deadline", "2020-01-01T00:00"], "--deadline: 2020-01-01 00:00 UTC is in the past"),
    (["--deadline", "soon"], "--deadline:"),
    (["--budget", "-3"], "--budget: $-3.00 is not a budget"),
    ([], "update: nothing to change"),
])
def test_a_bad_remote_update_gets_the_local_line_exit_2_and_changes_nothing(
        remote, on_server, laptop, server_store, tmp_path, args, field):
    assert remote("sweep", "submit", str(sweep_file(tmp_path, {**SWEEP, "job": INLINE}))).exit_code == 0
    [before], _ = stored(server_store)
    there, here = remote("sweep", "update", "lr", *args), on_server("sweep", "update", "lr", *args)
    assert there.exit_code == here.exit_code == 2 and there.output == here.output, there.output
    assert there.output.count("\n") == 1 and field in there.output
    [after], _ = stored(server_store)
    assert (after.max_cost, after.deadline) == (before.max_cost, before.deadline)


def test_the_limits_body_is_checked_field_by_field(api, token, server_store, tmp_path, remote, laptop):
    assert remote("sweep", "submit", str(sweep_file(tmp_path, {**SWEEP, "job": INLINE}))).exit_code == 0
    for body, says in (({"budget": "lots"}, "request: body.budget: must be a number"),
                       ({"cap": 3}, "request: body.cap: unknown key; remove it"),
                       ({"budget": -2}, "request: body.budget: must be greater than 0; raise it")):
        req = urllib.request.Request(f"{api.url}/v1/sweeps/lr/update", data=json.dumps(body).encode(),
                                     method="POST", headers={"Authorization": f"Bearer {token}",
                                                             "Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        error = json.loads(e.value.read())["error"]
        assert e.value.code == 422 and error.startswith(says), error
    [sweep], _ = stored(server_store)
    assert sweep.max_cost == 5

"""A remote ``submit`` is checked like a local one (``JobService.submit``, gpuorch.jobs.submitcheck):
a deadline on-demand cannot meet is refused with the same one line and nothing is stored; a
warning (only on-demand can meet it, or no enabled offer fits today) comes back and is shown.
A real server on 127.0.0.1 over a real SQLite store; the server and the CLI share this home's
configuration (the default local provider)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import yaml

from gpuorch.api.client import Client


def job_file(tmp_path, deadline, name="train", **extra):
    doc = {"name": name, "run": "python3 train.py", "resources": {"gpu": "A100:80GB:1"},
           "checkpoint": {"store": "file:///tmp/ckpt", "interval": "10m"}, "deadline": deadline, **extra}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_an_unmeetable_deadline_is_refused_remotely_with_the_local_line_and_nothing_stored(remote, local, home,
                                                                                          tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n")
    spec = job_file(tmp_path, {"at": "3h", "job_hours": 4}, workdir="src")
    there, here = remote("submit", str(spec)), local("submit", str(spec))
    assert there.exit_code == here.exit_code == 2
    [line] = there.output.strip().splitlines()
    assert line.startswith(f"error: {spec}: deadline: cannot be met even on on-demand") and "job_hours 4 h" in line
    assert there.output == here.output
    assert json.loads(remote("status", "--json").output)["jobs"] == []
    uploads = home / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []  # the refused upload is not kept


def test_the_http_api_refuses_it_with_422_and_one_line(api, token, tmp_path):
    spec = yaml.safe_load(job_file(tmp_path, {"at": "3h", "job_hours": 4}).read_text())
    req = urllib.request.Request(f"{api.url}/v1/jobs", method="POST",
                                 data=json.dumps({"spec": spec, "source": "job.yaml"}).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError("accepted")
    except urllib.error.HTTPError as e:
        code, err = e.code, json.loads(e.read())["error"]
    assert code == 422 and "\n" not in err
    assert err.startswith("job.yaml: deadline: cannot be met even on on-demand: ")
    assert Client(api.url, token).jobs() == []


def test_the_only_on_demand_warning_comes_back_and_is_shown(remote, local, tmp_path):
    spec = job_file(tmp_path, {"at": "260m", "job_hours": 4})
    r = remote("submit", str(spec), "--json")
    assert r.exit_code == 0, r.output
    job = json.loads(r.output)
    assert job["warning"].startswith("deadline: only on-demand can meet it")
    assert json.loads(local("submit", str(spec), "--json").output)["warning"] == job["warning"]
    plain = remote("submit", str(spec))
    assert plain.exit_code == 0 and f"warning: {job['warning']}" in plain.output
    assert len(json.loads(remote("status", "--json").output)["jobs"]) == 3
    forced = remote("submit", str(job_file(tmp_path, {"at": "260m", "job_hours": 4}, name="od",
                                           spot_policy="on-demand")), "--json")
    assert forced.exit_code == 0 and json.loads(forced.output)["warning"] is None


def test_a_job_no_enabled_offer_fits_today_gets_the_same_warning_remote_and_local(remote, local, tmp_path):
    p = tmp_path / "cheap.yaml"
    p.write_text(yaml.safe_dump({"name": "cheap", "run": "true", "resources": {"gpu": "A100:80GB:1"},
                                 "max_price_per_hour": 0.01}))
    there = json.loads(remote("submit", str(p), "--json").output)
    here = json.loads(local("submit", str(p), "--json").output)
    assert there["warning"] and "no offer satisfies the job" in there["warning"]
    assert there["warning"] == here["warning"]

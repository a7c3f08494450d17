"""A job's kind (``job``, or ``dev`` for a dev box: ``gpuorch.jobs.kinds``) over the HTTP API and
on the dashboard, as ``gpuorch status`` shows it; and ``gpuorch dev --env`` stored in the box's
spec. A real API server on 127.0.0.1 (conftest.py) over the store the local CLI writes."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

from sqlmodel import select

from gpuorch.store.models import Job


def _dashboard(url: str, token: str, path: str) -> str:
    """``path`` of the dashboard, logged in with the API token (a session cookie, as a browser)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    login = urllib.request.Request(f"{url}/ui/login", data=urllib.parse.urlencode(
        {"token": token, "next": "/ui/jobs"}).encode())
    try:
        opener.open(login, timeout=30)
        raise AssertionError("the login did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 303, e.read()
        cookie = e.headers["Set-Cookie"].split(";")[0]
    with opener.open(urllib.request.Request(f"{url}{path}", headers={"Cookie": cookie}), timeout=30) as r:
        return r.read().decode()


def test_the_api_and_the_dashboard_show_a_dev_box_as_kind_dev(api, token, remote, local, server_store, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: train\nrun: python3 train.py\nresources: {gpu: 'L4:1'}\n")
    assert local("submit", str(job), "--yes").exit_code == 0
    made = local("dev", "nb", "--gpu", "L4:1", "--env", "HF_HOME=/data/hf", "--env", "SEED=3", "--json")
    assert made.exit_code == 0, made.output
    box = json.loads(made.output)["id"]

    listed = json.loads(remote("status", "--json").output)["jobs"]
    assert {j["name"]: j["kind"] for j in listed} == {"train": "job", "nb": "dev"}
    assert json.loads(remote("status", "nb", "--json").output)["kind"] == "dev"
    table = remote("status", "--wide").output
    assert re.search(r"\bnb\s+dev\s+queued\b", table) and re.search(r"\btrain\s+job\s+queued\b", table), table
    with urllib.request.urlopen(urllib.request.Request(
            f"{api.url}/v1/jobs/{box}", headers={"Authorization": f"Bearer {token}"}), timeout=30) as r:
        assert json.loads(r.read())["kind"] == "dev"

    jobs_page = _dashboard(api.url, token, "/ui/jobs")
    assert '<th class="opt">KIND</th>' in jobs_page  # hidden on a phone, like PREEMPT
    assert re.search(r'>nb</td><td class="opt">dev</td>', jobs_page), jobs_page
    assert re.search(r'>train</td><td class="opt">job</td>', jobs_page)
    assert "<dt>kind</dt><dd>dev</dd>" in _dashboard(api.url, token, f"/ui/jobs/{box}")

    with server_store.read() as s:
        spec = json.loads(s.exec(select(Job.spec).where(Job.id == box)).one())
    assert spec["env"] == {"HF_HOME": "/data/hf", "SEED": "3"}

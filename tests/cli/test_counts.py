"""Counts users misread (issue 31), through the real CLI on a store the assembled daemon filled.

- ``ATTEMPTS 29`` for a trial that ran 3 times: launches refused for capacity were counted as
  attempts. ``status``, ``sweep status`` (text and JSON) and the dashboard show runs (attempts
  that got an instance) with the tries beside them; ``attempts`` stays in the JSON as it was.
- ``doctor`` printed a WARN and then "no problems found".
- ``status JOB`` printed the job's result as a Python dict.
- The docs said ``pip install gpuorch``, a package on no index.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
RESULT = {"loss": 0.25, "tags": ["a", "b"], "note": "it's done", "ok": True, "none": None}
SPEC = {"run": "printf '%s' \"$RESULT\" > \"$GPUORCH_RESULT_FILE\"", "env": {"RESULT": json.dumps(RESULT)},
        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot"}


def cli(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def markets(d: AssembledDaemon) -> list[tuple[str, str]]:
    return sorted({(o.zone, o.instance_type) for o in d.adapter("local").offers()
                   if o.instance_type == "local.a100-80gb.1" and o.spot_price_per_hour is not None})


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A job and a one-trial sweep that were refused for capacity twice or more each, then ran
    once and wrote a result: the store and home of the daemon that ran them."""
    tmp = tmp_path_factory.mktemp("counts")
    home = tmp / "home"
    with AssembledDaemon.start(home, {"backoff_s": 0.2}) as d:
        local = d.adapter("local")
        for zone, itype in markets(d):  # the spot markets the job may use have no capacity
            local.set_capacity(zone, itype, True, False)
        job = d.submit({"name": "counted", **SPEC})
        sweep = tmp / "sweep.yaml"
        sweep.write_text(yaml.safe_dump({"name": "tries", "job": SPEC, "parameters": {"SEED": [1]}}))
        sweep_id = d.submit_sweep(sweep)["id"]
        trial = d.until(lambda: next(iter(d.service.sweep(str(sweep_id))["trials"]), None), what="the trial")["id"]
        refused = lambda j: sum(a.reason == TerminationReason.NO_CAPACITY for a in d.attempts(j))  # noqa: E731
        d.until(lambda: refused(job) >= 2 and refused(trial) >= 2, what="two refused launches each")
        for zone, itype in markets(d):
            local.set_capacity(zone, itype, True, True)
        for j in (job, trial):
            assert d.until_terminal(j).status == JobStatus.SUCCEEDED
        tries = {j: len(d.attempts(j)) for j in (job, trial)}
        runs = {j: sum(a.launched_at is not None for a in d.attempts(j)) for j in (job, trial)}
    return {"home": home, "job": job, "trial": trial, "sweep": sweep_id, "tries": tries, "runs": runs}


@pytest.fixture
def on_store(filled, monkeypatch):
    monkeypatch.setenv("GPUORCH_HOME", str(filled["home"]))
    return filled


def test_the_store_holds_refused_tries_and_one_run(on_store):
    for j in (on_store["job"], on_store["trial"]):
        assert on_store["runs"][j] == 1 and on_store["tries"][j] >= 3


def test_status_json_adds_runs_and_tries_and_keeps_attempts(on_store):
    jobs = {j["id"]: j for j in json.loads(cli("status", "--json"))["jobs"]}
    detail = json.loads(cli("status", str(on_store["job"]), "--json"))
    for j in (on_store["job"], on_store["trial"]):
        tries = on_store["tries"][j]
        assert (jobs[j]["runs"], jobs[j]["tries"], jobs[j]["attempts"]) == (1, tries, tries)
    assert (detail["runs"], detail["tries"]) == (1, on_store["tries"][on_store["job"]])
    assert len(detail["attempt_list"]) == detail["tries"]


def test_status_table_shows_runs_with_the_tries_beside_them(on_store):
    header, *rows = cli("status").splitlines()
    assert header.split()[4] == "RUNS" and "ATT" not in header.split()
    row = next(r for r in rows if r.split()[1] == "counted")
    assert f"1 ({on_store['tries'][on_store['job']]} tries)" in row
    line = cli("status", "counted").splitlines()[0]
    assert f"runs 1 ({on_store['tries'][on_store['job']]} tries)" in line


def test_sweep_status_shows_runs_and_its_json_has_both(on_store):
    trial = on_store["trial"]
    report = json.loads(cli("sweep", "status", str(on_store["sweep"]), "--json"))
    [t] = report["trials"]
    assert (t["runs"], t["tries"], t["attempts"]) == (1, on_store["tries"][trial], on_store["tries"][trial])
    out = cli("sweep", "status", str(on_store["sweep"]))
    header = next(x for x in out.splitlines() if x.startswith("ID"))
    assert "RUNS" in header.split() and "ATTEMPTS" not in header.split()
    assert f"1 ({on_store['tries'][trial]} tries)" in out


def test_status_job_prints_the_result_as_json(on_store):
    out = cli("status", "counted")
    assert "{'" not in out and "True" not in out and "None" not in out  # no Python repr
    [line] = [x for x in out.splitlines() if x.startswith("result: ")]
    assert json.loads(line.removeprefix("result: ")) == RESULT
    assert json.loads(cli("status", "counted", "--json"))["result"] == RESULT


def test_the_dashboard_shows_runs_with_tries(on_store):
    from gpuorch.jobs.service import JobService
    from gpuorch.web import data
    from gpuorch.web.pages import job_page, jobs_page

    service = JobService(None, on_store["home"], url=f"sqlite:///{on_store['home'] / 'state.db'}")
    tries = on_store["tries"][on_store["job"]]
    listing = jobs_page(data.jobs(service))
    assert re.search(r"<th[^>]*>RUNS</th>", listing) and re.search(rf"<td[^>]*>1 \({tries} tries\)</td>", listing), \
        listing
    page = job_page(data.job(service, "counted"), service.now())
    assert f"<dt>runs</dt><dd>1 ({tries} tries)" in page


def test_doctor_counts_its_warnings_in_the_summary(tmp_path, monkeypatch):
    """A fresh home has no database yet: a warning, not a failure; the last line counts it."""
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "fresh"))
    r = runner.invoke(app, ["doctor"])
    warns = sum(line.startswith("WARN") for line in r.output.splitlines())
    fails = sum(line.startswith("FAIL") for line in r.output.splitlines())
    assert warns >= 1, r.output
    last = r.output.strip().splitlines()[-1]
    assert "no problems found" not in r.output
    parts = [f"{n} {w}{'' if n == 1 else 's'}" for n, w in ((fails, "problem"), (warns, "warning")) if n]
    assert last == ", ".join(parts) + " found", r.output
    data = json.loads(runner.invoke(app, ["doctor", "--json"]).stdout)
    assert data["summary"] == last


def installs_from_an_index(command: str) -> bool:
    """Whether a shell command (``sudo /opt/x/.venv/bin/pip install -q 'gpuorch[aws]' && ...``)
    installs gpuorch by name, from an index, rather than from a path or a ``git+`` URL."""
    for part in re.split(r"&&|;|\|\||#", command):
        words = part.split()
        while words and (words[0] == "sudo" or "=" in words[0]):
            words = words[1:]
        if words[:3] in (["python3", "-m", "pip"], ["python", "-m", "pip"]):
            words = ["pip", *words[3:]]
        if len(words) < 2 or words[0].rsplit("/", 1)[-1] not in ("pip", "pip3") or words[1] != "install":
            continue
        args = [w.strip("'\"") for w in words[2:] if not w.startswith("-")]
        if any(re.fullmatch(r"gpuorch(\[[\w,-]*\])?", a) for a in args) and "@" not in words:
            return True
    return False


def test_no_doc_installs_gpuorch_from_an_index():
    """gpuorch is on no package index: the docs install it from the repository (a clone and
    ``pip install -e .``, or ``git+``), never ``pip install gpuorch`` (a package of that name on an
    index would be someone else's). Commands are the lines of code blocks and inline code spans;
    quoted program output (a doctor line) is not a command."""
    assert installs_from_an_index("sudo /opt/g/.venv/bin/pip install 'gpuorch[aws]'")
    assert installs_from_an_index("python3 -m pip install -q gpuorch")
    assert not installs_from_an_index("pip install -e '.[aws]'")
    assert not installs_from_an_index("pip install 'gpuorch[aws] @ git+https://example.org/gpuorch.git'")
    assert not installs_from_an_index("FAIL  object stores  need the aws extra: pip install gpuorch[aws]")
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        block = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                block = not block
                continue
            commands = [line] if block else re.findall(r"`([^`]+)`", line)
            found += [f"{path.name}:{n}: {c}" for c in commands if installs_from_an_index(c)]
    assert not found, "\n".join(found)
    readme = (REPO / "README.md").read_text()
    assert "git clone" in readme and "pip install -e" in readme and "git+" in readme

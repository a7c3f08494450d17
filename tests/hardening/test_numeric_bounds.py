"""Issue 31: every number a user gives is finite and in range, by one rule (``gpuorch.bounds``).

The numeric fields are enumerated from the models themselves (job spec, sweep, daemon
configuration, the API's sweep-limits body), so a field added later is covered without touching
this file: each must declare an upper bound, and for each a generated NaN, infinity or
out-of-range value is refused through the real entry point -- the CLI on a spec file, a sweep
file or a config file, and the HTTP API -- with one line naming the field, exit code 2 or a 4xx,
and nothing stored.
"""

from __future__ import annotations

import json
import math
import secrets
import types
import typing
import urllib.parse
from typing import Any

import pytest
import yaml
from annotated_types import Ge, Gt, Le, Lt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.jobs.gpu_request import GpuRequirement
from gpuorch.jobs.spec import Budget, Checkpoint, Deadline, JobSpec, VolumeRequest
from gpuorch.ops.config import DaemonConfig
from gpuorch.sizing.workload import Architecture, Distributed, Workload
from gpuorch.store import Store
from gpuorch.sweeps.spec import Objective, Pruning, Search, SweepSpec
from tests.kit.cli import one_line

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[dev]'")
from gpuorch.api.server import ApiThread, SweepLimitsRequest

runner = CliRunner()
Path_ = tuple[str, ...]

# The least valid mapping of each nested model, so that one field of it can be set alone. A new
# nested model with a numeric field fails test_every_nested_model_has_a_minimal_example until added.
MINIMAL: dict[type[BaseModel], dict[str, Any]] = {
    GpuRequirement: {"name": "A100"}, Checkpoint: {"store": "file:///tmp/gpuorch-ck"}, Budget: {"max_cost": 1},
    VolumeRequest: {"size": "10GB", "mount": "/data"}, Deadline: {"at": "8h", "job_hours": 1},
    Workload: {"params": "1B"}, Architecture: {"layers": 2, "hidden": 64, "heads": 2},
    Distributed: {"strategy": "ddp"}, Search: {"method": "random", "count": 2}, Objective: {"metric": "loss"},
    Pruning: {"rule": "median"},
}
JOB = {"name": "t", "run": "echo hi"}
SWEEP = {"name": "s", "job": dict(JOB), "parameters": {"X": [1, 2]}, "objective": {"metric": "loss"}}


class Numeric(typing.NamedTuple):
    path: Path_
    kind: type  # int or float
    low: float | None  # the least value allowed (None: the field's parser refuses negatives)
    high: float | None
    models: tuple[type[BaseModel], ...]  # the nested model at each step of the path


def _arms(ann: Any) -> list[tuple[Any, list[Any]]]:
    """The types a field may take, each with the metadata (bounds) attached to it."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(ann)
        return [(t, meta + m) for t, m in _arms(base)]
    if origin in (typing.Union, types.UnionType):
        return [arm for a in typing.get_args(ann) for arm in _arms(a)]
    return [(ann, [])]


def _bounds(meta: list[Any]) -> tuple[float | None, float | None]:
    low = high = None
    for m in meta:
        for c in (m.metadata if isinstance(m, FieldInfo) else [m]):
            if isinstance(c, Ge | Gt):
                low = c.ge if isinstance(c, Ge) else c.gt
            elif isinstance(c, Le | Lt):
                high = c.le if isinstance(c, Le) else c.lt
    return low, high


def numeric_fields(model: type[BaseModel], path: Path_ = (), models: tuple[type[BaseModel], ...] = ()
                   ) -> list[Numeric]:
    out = []
    for name, info in model.model_fields.items():
        for t, meta in _arms(info.annotation):
            if isinstance(t, type) and issubclass(t, BaseModel):
                out += numeric_fields(t, path + (name,), models + (t,))
            elif t in (int, float):
                out.append(Numeric(path + (name,), t, *_bounds(list(info.metadata) + meta), models))
    return out


JOB_FIELDS = numeric_fields(JobSpec)
SWEEP_FIELDS = numeric_fields(SweepSpec) + [f._replace(path=("job",) + f.path) for f in JOB_FIELDS]
CONFIG_FIELDS = numeric_fields(DaemonConfig)
LIMIT_FIELDS = numeric_fields(SweepLimitsRequest)


def test_the_models_have_the_numeric_fields_this_test_generates_for():
    assert {"budget.max_cost", "nodes", "resources.cpus", "checkpoint.interval"} <= {
        ".".join(f.path) for f in JOB_FIELDS}
    assert {"max_parallel", "search.seed", "job.budget.max_cost"} <= {".".join(f.path) for f in SWEEP_FIELDS}
    assert {"poll_s", "daily_budget", "api.max_body_bytes"} <= {".".join(f.path) for f in CONFIG_FIELDS}
    assert [f.path for f in LIMIT_FIELDS] == [("budget",)]


@pytest.mark.parametrize("field", JOB_FIELDS + SWEEP_FIELDS + CONFIG_FIELDS + LIMIT_FIELDS,
                         ids=lambda f: ".".join(f.path))
def test_every_numeric_field_declares_an_upper_bound(field):
    assert field.high is not None and math.isfinite(field.high), (
        f"{'.'.join(field.path)}: give it Field(le=...) (gpuorch.bounds); an unbounded number can be 1e308")


def test_every_nested_model_has_a_minimal_example():
    for f in JOB_FIELDS + SWEEP_FIELDS:
        for m in f.models:
            assert m in MINIMAL or not any(k for k, i in m.model_fields.items() if i.is_required()), m


def document(base: dict[str, Any], field: Numeric, value: Any) -> dict[str, Any]:
    """``base`` with ``field`` set to ``value`` (each model on the way at its minimal form)."""
    doc = json.loads(json.dumps(base))
    node = doc
    steps = field.path[1:] if field.path[0] == "job" else field.path
    if field.path[0] == "job":
        node = doc["job"]
    models = field.models[-(len(steps) - 1):] if len(steps) > 1 else ()
    for name, model in zip(steps[:-1], models, strict=True):
        node[name] = {**MINIMAL.get(model, {}), **(node.get(name) or {})}
        node = node[name]
    node[steps[-1]] = value
    return doc


def bad_values(field: Numeric) -> st.SearchStrategy[Any]:
    """NaN, the infinities, and values past either bound."""
    high = field.high if field.high is not None else 1e300
    low = field.low if field.low is not None else 0
    if field.kind is int:
        out = st.integers(min_value=int(high) + 1, max_value=int(high) * 10**20 + 10**20) | st.integers(
            max_value=math.ceil(low) - 1, min_value=math.ceil(low) - 10**25)
    else:
        out = st.floats(min_value=high, exclude_min=True, allow_infinity=False) | st.floats(
            max_value=low, exclude_max=True, allow_infinity=False, min_value=-1e300)
    return out | st.sampled_from([math.nan, math.inf, -math.inf])


def dotted(field: Numeric) -> str:
    return ".".join(field.path[1:] if field.path[0] == "job" else field.path)


def nothing_stored(home) -> None:
    db = home / "state.db"
    if db.exists():
        store = Store(f"sqlite:///{db}")
        try:
            from sqlmodel import select

            from gpuorch.store.models import Job, Sweep

            with store.read() as s:
                assert list(s.exec(select(Job))) == [] and list(s.exec(select(Sweep))) == []
        finally:
            store.close()


EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@EXAMPLES
@given(data=st.data())
def test_a_job_spec_file_with_a_bad_number_is_refused_by_the_cli(_isolated_home, tmp_path_factory, data):
    field = data.draw(st.sampled_from(JOB_FIELDS), "field")
    value = data.draw(bad_values(field), "value")
    path = tmp_path_factory.mktemp("spec") / "job.yaml"
    path.write_text(yaml.safe_dump(document(JOB, field, value)))
    r = runner.invoke(app, ["submit", str(path)])
    assert r.exit_code == 2 and dotted(field) in one_line(r.output), (field.path, value, r.output)
    nothing_stored(_isolated_home)


@EXAMPLES
@given(data=st.data())
def test_a_sweep_file_with_a_bad_number_is_refused_by_the_cli(_isolated_home, tmp_path_factory, data):
    field = data.draw(st.sampled_from(SWEEP_FIELDS), "field")
    value = data.draw(bad_values(field), "value")
    path = tmp_path_factory.mktemp("sweep") / "sweep.yaml"
    path.write_text(yaml.safe_dump(document(SWEEP, field, value)))
    r = runner.invoke(app, ["sweep", "submit", str(path)])
    assert r.exit_code == 2 and dotted(field) in one_line(r.output), (field.path, value, r.output)
    nothing_stored(_isolated_home)


@EXAMPLES
@given(data=st.data())
def test_a_config_file_with_a_bad_number_is_refused_by_the_cli(_isolated_home, tmp_path_factory, data):
    field = data.draw(st.sampled_from(CONFIG_FIELDS), "field")
    value = data.draw(bad_values(field), "value")
    path = tmp_path_factory.mktemp("cfg") / "config.yaml"
    path.write_text(yaml.safe_dump(document({}, field, value)))
    r = runner.invoke(app, ["--config", str(path), "status"])
    assert r.exit_code == 2 and dotted(field) in one_line(r.output), (field.path, value, r.output)
    nothing_stored(_isolated_home)



SIMULATE = ["simulate", "policy", "--trace", "x", "--job-hours", "1", "--deadline-hours", "2", "--changeover-hours",
            "0", "--on-demand-price", "1", "--spot-price", "0.5"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
@pytest.mark.parametrize(("argv", "option"), [
    (["dev", "box", "--idle-gpu-util", "{}"], "--idle-gpu-util"),
    ([*SIMULATE, "--job-hours", "{}"], "--job-hours"),
    ([*SIMULATE, "--spot-price={}"], "--spot-price"),
])
def test_a_number_option_given_nan_or_an_infinity_says_it_is_not_finite(_isolated_home, argv, option, value):
    """Typer's range check reported NaN as out of range ("should be less than or equal to 100"),
    a fix that does not apply: the line says the number is not finite, and nothing is stored."""
    r = runner.invoke(app, [a.format(value) for a in argv])
    line = one_line(r.output)
    assert r.exit_code == 2 and option in line and f"{value} is not a finite number" in line, r.output
    nothing_stored(_isolated_home)

# -- the HTTP API: a real server on 127.0.0.1, one for the module ---------------------------------

TOKEN = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    home = tmp_path_factory.mktemp("api-home")
    store = Store(f"sqlite:///{home / 'state.db'}")
    server = ApiThread(DaemonConfig(home=home, providers={"local": {}}, api={"token": TOKEN, "port": 0}),
                       store).start()
    code, _ = post(server.url, "/v1/sweeps", {"spec": {**SWEEP, "name": "kept", "budget": {"max_cost": 5}}})
    assert code == 201
    yield server
    server.stop()
    store.close()


def request(url: str, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    import http.client

    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request(method, path, body=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                   "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data) if data else None


def post(url: str, path: str, doc: Any) -> tuple[int, Any]:
    return request(url, "POST", path, json.dumps(doc).encode())  # NaN and Infinity as Python writes them


def api_unchanged(url: str) -> None:
    assert len(request(url, "GET", "/v1/jobs")[1]) == 2  # the kept sweep's trials, and nothing else
    [kept] = request(url, "GET", "/v1/sweeps")[1]
    assert kept["name"] == "kept" and kept["max_cost"] == 5


def api_line(code: int, body: Any) -> str:
    assert 400 <= code < 500, (code, body)
    line = body["detail"]
    assert isinstance(line, str) and "\n" not in line and line == body["error"]
    return line


@EXAMPLES
@given(data=st.data())
def test_the_api_refuses_a_bad_number_in_a_job_a_sweep_or_new_limits(api, data):
    where = data.draw(st.sampled_from(["jobs", "sweeps", "limits"]), "where")
    fields = {"jobs": JOB_FIELDS, "sweeps": SWEEP_FIELDS, "limits": LIMIT_FIELDS}[where]
    field = data.draw(st.sampled_from(fields), "field")
    value = data.draw(bad_values(field), "value")
    if where == "limits":
        code, body = post(api.url, "/v1/sweeps/kept/update", document({}, field, value))
    else:
        code, body = post(api.url, f"/v1/{where}", {"spec": document(JOB if where == "jobs" else SWEEP, field, value)})
    assert dotted(field) in api_line(code, body), (field.path, value, body)
    api_unchanged(api.url)

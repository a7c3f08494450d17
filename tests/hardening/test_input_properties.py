"""Issue 16, build item 7: property tests. Any job spec, sweep or daemon configuration either
loads back exactly as the daemon reads it, or is refused in one line with nothing stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuorch.errors import UserInputError
from gpuorch.jobs.service import JobService
from gpuorch.jobs.spec import JobSpec, load_stored, parse_spec
from gpuorch.jobs.yamlsafe import loads
from gpuorch.ops.config import DaemonConfig
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store
from gpuorch.store.models import Job
from gpuorch.sweeps.spec import parse_sweep

BOUNDED = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])
NOW = datetime(2026, 1, 1, tzinfo=UTC)

# Values of every JSON/YAML kind, the awkward ones included: NaN, infinities, huge and negative
# numbers, NUL bytes, newlines, non-ASCII digits, empty strings.
odd_text = st.sampled_from(["", " ", "\n", "x\0y", "²", "A100:2:3", "-3", "1e300", ".nan", "8h", "1e20h",
                            "file://", "s3://", "s3://b/p", "SIGKILL", "usr1", "/abs", "../up", "A100:80GB:1",
                            "24GB+", "T4", "local", "nosuchcloud", "$(touch x)", "'{X}'"])
scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                   st.floats(allow_nan=True, allow_infinity=True), odd_text, st.text(max_size=12))
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=8) | odd_text, inner,
                                                                     max_size=3)), max_leaves=8)

resources = st.fixed_dictionaries({}, optional={"gpu": value | odd_text, "cpus": value, "memory": value,
                                                "disk": value})
checkpoint = st.fixed_dictionaries({"store": value | odd_text}, optional={
    "dir": value | odd_text, "interval": value, "signal": value | odd_text, "keep": value})
spec_dict = st.fixed_dictionaries(
    {"name": st.sampled_from(["ft", "ft\n", "", "Bad Name", "a" * 70]) | value,
     "run": st.sampled_from(["python train.py", "", "  "]) | value},
    optional={"env": st.dictionaries(st.text(max_size=6) | odd_text, value, max_size=3) | value,
              "resources": resources | value, "checkpoint": checkpoint | value,
              "budget": st.fixed_dictionaries({"max_cost": value}) | value,
              "deadline": value | st.fixed_dictionaries({"at": value | odd_text}, optional={"job_hours": value,
                                                                                            "startup": value}),
              "volume": st.fixed_dictionaries({"size": value, "mount": value | odd_text}),
              "providers": value, "regions": value, "max_price_per_hour": value,
              "retry": st.fixed_dictionaries({}, optional={"max_preemptions": value, "max_failures": value}),
              "spot_policy": value | st.sampled_from(["spot", "on-demand", "auto"])})


def assert_one_line(e: UserInputError) -> None:
    assert str(e) and "\n" not in str(e), repr(str(e))


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    home = tmp_path_factory.mktemp("props")
    store = Store(f"sqlite:///{home / 'state.db'}")
    yield JobService(store, home, providers={"local": {}})
    store.close()


def stored(service: JobService) -> list[Job]:
    from sqlmodel import select

    with service.store.read() as s:
        return list(s.exec(select(Job)))


@BOUNDED
@given(data=spec_dict)
def test_any_spec_is_stored_as_the_daemon_reads_it_or_refused_in_one_line(service, data):
    before = len(stored(service))
    try:
        spec = parse_spec(data)
        out = service.submit(spec)
    except UserInputError as e:
        assert_one_line(e)
        assert len(stored(service)) == before  # nothing stored
        return
    rows = stored(service)
    assert len(rows) == before + 1
    row = next(r for r in rows if r.id == out["id"])
    assert JobSpec.model_validate_json(row.spec) == spec  # the stored form, exactly
    assert load_stored(row.spec) == spec  # and the daemon's lighter copy of it


@BOUNDED
@given(data=spec_dict)
def test_any_spec_written_as_yaml_loads_the_same_or_is_refused(data):
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        return
    try:
        spec = parse_spec(loads(text, "job.yaml"), "job.yaml")
    except UserInputError as e:
        assert_one_line(e)
        return
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200) | st.sampled_from(["a: &x 1\nb: *x\n", "a: 1\na: 2\n", "a: !!binary aGk=\n",
                                                     "[" * 100 + "]" * 100, "a: [\n"]))
def test_any_text_parses_or_is_refused_in_one_line(text):
    try:
        loads(text, "f.yaml")
    except UserInputError as e:
        assert_one_line(e)


param_domain = st.one_of(st.lists(scalar, max_size=3),
                         st.fixed_dictionaries({}, optional={"int": st.lists(value, max_size=3)}),
                         st.fixed_dictionaries({}, optional={"uniform": st.lists(value, max_size=3)}),
                         st.fixed_dictionaries({}, optional={"loguniform": st.lists(value, max_size=3)}), value)
sweep_dict = st.fixed_dictionaries(
    {"name": st.sampled_from(["s", "S", ""]) | value,
     "job": st.fixed_dictionaries({"run": st.sampled_from(["echo {X}", "echo '{X}'", "true"]) | value}),
     "parameters": st.dictionaries(st.sampled_from(["X", "Y", "GPUORCH_X", "1x"]), param_domain, max_size=2)},
    optional={"search": st.fixed_dictionaries({"method": st.sampled_from(["grid", "random"]) | value},
                                              optional={"count": value, "seed": value}),
              "deadline": value, "budget": st.fixed_dictionaries({"max_cost": value}),
              "max_parallel": value})


@BOUNDED
@given(data=sweep_dict)
def test_any_sweep_expands_into_trials_the_daemon_reads_or_is_refused(data):
    try:
        _, trials = parse_sweep(data, "sweep.yaml", NOW)
    except UserInputError as e:
        assert_one_line(e)
        return
    for _, job in trials:
        assert JobSpec.model_validate_json(job.model_dump_json()) == job


config_dict = st.fixed_dictionaries({}, optional={
    k: value for k in ("poll_s", "lease_s", "max_sleep_s", "drain_timeout_s", "daily_budget", "backoff_s",
                       "heartbeat_timeout_s", "database_url", "log_format", "recovery_strategy")}
    | {"api": st.fixed_dictionaries({}, optional={"port": value, "max_body_bytes": value}) | value,
       "metrics": st.fixed_dictionaries({}, optional={"port": value, "enabled": value}) | value})


@BOUNDED
@given(data=config_dict)
def test_any_configuration_loads_to_finite_values_or_is_refused(tmp_path_factory, data):
    path = Path(tmp_path_factory.mktemp("cfg")) / "config.yaml"
    try:
        path.write_text(yaml.safe_dump(data, allow_unicode=True))
    except (yaml.YAMLError, ValueError):
        return
    try:
        cfg = load_config(path)
    except UserInputError as e:
        assert_one_line(e)
        return
    again = DaemonConfig.model_validate_json(cfg.model_dump_json())
    assert json.loads(again.model_dump_json()) == json.loads(cfg.model_dump_json())  # nothing turned into null

"""Issue 16, items 1, 5 and 6: every bad job spec is refused in one line that names the field,
and a spec that is accepted loads back exactly as the daemon reads it (``model_validate_json``)."""

from __future__ import annotations

import json

import pytest

from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import JobSpec, load_spec, parse_spec

BASE = {"name": "ft", "run": "python train.py"}
CKPT = {"store": "s3://bucket/ckpt"}


def refused(data: dict, field: str) -> str:
    with pytest.raises(UserInputError) as e:
        parse_spec(data)
    line = str(e.value)
    assert "\n" not in line and field in line, line
    return line


NON_FINITE = [float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize("where, field", [
    ({"resources": {"cpus": None}}, "resources.cpus"),
    ({"resources": {"memory": None}}, "resources.memory"),
    ({"resources": {"disk": None}}, "resources.disk"),
    ({"budget": {"max_cost": None}}, "budget.max_cost"),
    ({"checkpoint": {**CKPT, "interval": None}}, "checkpoint.interval"),
    ({"volume": {"size": None, "mount": "/data"}}, "volume.size"),
    ({"deadline": {"at": "8h", "job_hours": None}}, "deadline.job_hours"),
    ({"deadline": {"at": "8h", "job_hours": 2, "startup": None}}, "deadline.startup"),
    ({"resources": {"gpu": {"min_memory_gib": None}}}, "resources.gpu.min_memory_gib"),
    ({"max_price_per_hour": None}, "max_price_per_hour"),
])
def test_non_finite_numbers_are_refused(where, field, bad):
    def put(v):  # None marks where the bad number goes
        return {k: put(x) for k, x in v.items()} if isinstance(v, dict) else bad if v is None else v
    refused({**BASE, **put(where)}, field)


def test_nan_from_yaml_is_refused_not_turned_into_any_gpu(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("name: ft\nrun: x\nresources:\n  gpu: {min_memory_gib: .nan}\n")
    with pytest.raises(UserInputError, match="min_memory_gib"):
        load_spec(p)


@pytest.mark.parametrize("data, field", [
    ({**BASE, "env": {"A": "x\0y"}}, "env.A"),
    ({**BASE, "env": {"A": "x" * (128 * 1024 + 1)}}, "env.A"),
    ({**BASE, "env": {"A": None}}, "env.A"),
    ({**BASE, "env": {"A": {"nested": 1}}}, "env.A"),
    ({**BASE, "checkpoint": {"store": "file://"}}, "checkpoint.store"),
    ({**BASE, "checkpoint": {"store": "s3://"}}, "checkpoint.store"),
    ({**BASE, "checkpoint": {"store": "s3:///prefix"}}, "checkpoint.store"),
    ({**BASE, "resources": {"gpu": {"name": "A100", "count": -3}}}, "resources.gpu.count"),
    ({**BASE, "resources": {"gpu": {"name": "Z900"}}}, "resources.gpu.name"),
    ({**BASE, "resources": {"cpus": 1e300}}, "resources.cpus"),
    ({**BASE, "resources": {"memory": "1e300GB"}}, "resources.memory"),
    ({**BASE, "name": "ft\n"}, "name"),
    ({**BASE, "resources": {"gpu": "A100:2:3"}}, "resources.gpu"),
    ({**BASE, "run": ""}, "run"),
    ({**BASE, "run": "  \n "}, "run"),
    ({**BASE, "checkpoint": {**CKPT, "signal": "SIGKILL"}}, "checkpoint.signal"),
    ({**BASE, "checkpoint": {**CKPT, "signal": "SIGSTOP"}}, "checkpoint.signal"),
    ({**BASE, "checkpoint": {**CKPT, "dir": "/etc/ckpt"}}, "checkpoint.dir"),
    ({**BASE, "checkpoint": {**CKPT, "dir": "../../outside"}}, "checkpoint.dir"),
    ({**BASE, "deadline": {"at": "100000000000000000000h", "job_hours": 1}}, "deadline"),
    ({**BASE, "deadline": {"at": "8h", "job_hours": 1e20}}, "deadline.job_hours"),
    ({**BASE, "retry": {"max_preemptions": 10**30}}, "retry.max_preemptions"),
    ({**BASE, "providers": ["x"] * 1000}, "providers"),
    ({**BASE, "resources": {"gpu": "T4", "a\nb": 1}}, "resources.'a\\nb'"),  # a key quoted: still one line
])
def test_bad_values_are_refused_in_one_line(data, field):
    refused(data, field)


def test_env_numbers_still_become_their_text():
    assert parse_spec({**BASE, "env": {"LR": 0.1, "N": 3}}).env == {"LR": "0.1", "N": "3"}


def test_a_catchable_signal_and_a_relative_dir_are_kept():
    spec = parse_spec({**BASE, "checkpoint": {**CKPT, "signal": "term", "dir": "out/ckpt"}})
    assert spec.checkpoint is not None
    assert (spec.checkpoint.signal, spec.checkpoint.dir) == ("SIGTERM", "out/ckpt")


def test_an_accepted_spec_loads_back_as_the_daemon_reads_it():
    spec = parse_spec({**BASE, "resources": {"gpu": "A100:80GB:2", "cpus": 8, "memory": "64GB"},
                       "checkpoint": {**CKPT, "interval": "10m"}, "env": {"A": "1"},
                       "deadline": {"at": "8h", "job_hours": 2}})
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


# -- the YAML file itself -------------------------------------------------------------------------

def load_text(tmp_path, text: str | bytes) -> str:
    p = tmp_path / "job.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(UserInputError) as e:
        load_spec(p)
    line = str(e.value)
    assert "\n" not in line, line
    return line


def test_duplicate_keys_are_refused(tmp_path):
    assert "name" in load_text(tmp_path, "name: a\nrun: x\nname: b\n")


def test_duplicate_nested_keys_are_refused(tmp_path):
    assert "cpus" in load_text(tmp_path, "name: a\nrun: x\nresources:\n  cpus: 1\n  cpus: 2\n")


def test_aliases_are_refused(tmp_path):
    # each variable repeats the one before it: a few hundred bytes that expand without bound
    assert "alias" in load_text(tmp_path, "name: a\nrun: x\nenv:\n  A: &a 'xxxxxxxxxxxxxxxx'\n  B: *a\n  C: *a\n")


def test_explicit_tags_are_refused(tmp_path):
    assert "tag" in load_text(tmp_path, "name: a\nrun: !!binary aGVsbG8=\n")


def test_non_utf8_is_refused_in_one_line(tmp_path):
    assert "UTF-8" in load_text(tmp_path, b"name: \xff\xfe\nrun: x\n")


def test_deep_nesting_is_refused_in_one_line(tmp_path):
    assert "nest" in load_text(tmp_path, "name: a\nrun: x\nenv: " + "[" * 5000 + "]" * 5000 + "\n")


def test_a_huge_file_is_refused_in_one_line(tmp_path):
    assert "large" in load_text(tmp_path, "name: a\nrun: x\n#" + "y" * (2 << 20) + "\n")


def test_json_infinity_in_an_api_body_is_refused():
    body = json.loads('{"name": "ft", "run": "x", "resources": {"cpus": Infinity}}')
    refused(body, "resources.cpus")


def test_a_provider_that_is_not_enabled_is_refused_and_nothing_is_stored(store, tmp_path):
    from gpuorch.jobs.service import JobService

    service = JobService(store, tmp_path, providers={"local": {}})
    with pytest.raises(UserInputError, match=r"providers: 'nosuchcloud' is not an enabled provider"):
        service.submit(parse_spec({**BASE, "providers": ["nosuchcloud"]}), "job.yaml")
    assert service.jobs() == []


def test_more_cpus_than_any_offer_has_is_refused_not_queued_forever(store, tmp_path):
    from gpuorch.jobs.service import JobService

    service = JobService(store, tmp_path, providers={"local": {}})
    with pytest.raises(UserInputError, match=r"resources\.cpus: 4000 is more than any offer has"):
        service.submit(parse_spec({**BASE, "resources": {"cpus": 4000}}), "job.yaml")
    assert service.jobs() == []
    assert service.submit(parse_spec({**BASE, "resources": {"cpus": 2}}), "job.yaml")["status"] == "queued"

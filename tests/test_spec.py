from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.jobs.lifetime import duration_text
from gpuorch.jobs.spec import GpuRequirement, SpotPolicy, load_spec, parse_spec
from gpuorch.units import parse_duration_s

BASE = {"name": "ft", "run": "python train.py"}


def test_minimal_spec_defaults():
    spec = parse_spec(BASE)
    assert spec.spot_policy == SpotPolicy.AUTO and spec.resources.gpu is None
    assert spec.retry.max_preemptions == 20 and spec.checkpoint is None


@pytest.mark.parametrize(
    "text, name, variant, memory, count, at_least, most",
    [
        ("A100:80GB:1", "A100", False, 80, 1, False, None),  # the family, narrowed by memory
        ("A100:2", "A100", False, None, 2, False, None),
        ("H100:8", "H100", False, None, 8, False, None),
        ("24GB+", None, False, 24, 1, False, None),
        ("48GB+:2", None, False, 48, 2, False, None),
        ("t4", "T4", False, None, 1, False, None),
        ("a100-80gb:4", "A100-80GB", True, None, 4, False, None),
        ("A100-40GB", "A100", True, None, 1, False, None),  # the 40 GB variant only
        ("A100:1..8", "A100", False, None, 1, True, 8),
        ("A100:2+", "A100", False, None, 2, True, None),
        ("80GB+:4..8", None, False, 80, 4, True, 8),
        ("H100-NVL", "H100-NVL", True, None, 1, False, None),
    ],
)
def test_gpu_forms(text, name, variant, memory, count, at_least, most):
    req = GpuRequirement.parse(text)
    assert (req.name, req.variant, req.min_memory_gib, req.count, req.at_least, req.max_count) == (
        name, variant, memory, count, at_least, most)


def test_gpu_counts_are_exact_unless_a_range_or_allow_larger():
    one, some, between = (GpuRequirement.parse(t) for t in ("A100:1", "A100:2+", "A100:1..4"))
    assert [one.allows(n) for n in (1, 2, 8)] == [True, False, False]
    assert [one.allows(n, allow_larger=True) for n in (1, 8)] == [True, True] and one.uses(8) == 1
    assert [some.allows(n) for n in (1, 2, 8)] == [False, True, True] and some.uses(8) == 8
    assert [between.allows(n) for n in (1, 4, 8)] == [True, True, False] and between.uses(8) == 4
    assert str(between) == "A100:1..4" and str(GpuRequirement.parse("A100:80GB:2+")) == "A100:80GB+:2+"


def test_gpu_names_are_families_and_variants_narrow():
    family, variant, memory = (GpuRequirement.parse(t) for t in ("A100", "A100-80GB", "H100:94GB"))
    assert [family.matches(g) for g in ("A100", "A100-80GB", "A100-PCIE-80GB", "H100")] == [True, True, True, False]
    assert [variant.matches(g) for g in ("A100", "A100-80GB", "A100-PCIE-80GB")] == [False, True, False]
    assert memory.matches("H100-NVL") and memory.matches("H100-PCIE") and memory.memory_floor_gib() == 94


def test_the_mapping_form_and_a_stored_spec_read_back_keep_their_meaning():
    for text in ("A100:1", "A100-80GB:2", "H100:94GB:1..2", "24GB+:4+", "A100-40GB"):
        spec = parse_spec({**BASE, "resources": {"gpu": text}})
        again = parse_spec(spec.model_dump(mode="json"))
        assert again.resources.gpu == spec.resources.gpu, text
    old = parse_spec({**BASE, "resources": {"gpu": {"name": "A100-80GB", "min_memory_gib": 80, "count": 1}}})
    assert old.resources.gpu.variant and old.resources.gpu.matches("A100-80GB")  # stored before families
    mapped = parse_spec({**BASE, "resources": {"gpu": {"name": "h100", "count": 8}}}).resources.gpu
    assert (mapped.name, mapped.variant, mapped.matches("H100-NVL")) == ("H100", False, True)


@pytest.mark.parametrize(
    "gpu, hint",
    [
        ("A100:0", "the GPU count must be at least 1"),
        ("A100:8..2", "the range 8..2 has its minimum above its maximum; write 2..8"),
        ("A100:0..4", "at least 1"),
    ],
)
def test_bad_gpu_counts_name_the_field_and_the_fix(gpu, hint):
    with pytest.raises(UserInputError) as e:
        parse_spec({**BASE, "resources": {"gpu": gpu}}, "job.yaml")
    assert "\n" not in str(e.value) and str(e.value).startswith("job.yaml: resources.gpu:") and hint in str(e.value)


def test_full_spec_parses_sizes_and_durations():
    spec = parse_spec({**BASE, "resources": {"gpu": "A100:80GB:1", "cpus": 8, "memory": "64GB", "disk": "1TB"},
                       "checkpoint": {"store": "s3://bucket/ckpt", "interval": "10m", "signal": "usr1"},
                       "spot_policy": "spot", "max_price_per_hour": 2.5, "env": {"LR": 0.1}})
    assert spec.resources.memory == 64 and spec.resources.disk == 1024
    assert spec.checkpoint.interval == 600 and spec.checkpoint.signal == "SIGUSR1"
    assert spec.env == {"LR": "0.1"}


def test_volume_parses_size_and_mount():
    spec = parse_spec({**BASE, "volume": {"size": "100GB", "mount": "/data/"}})
    assert spec.volume is not None and (spec.volume.size, spec.volume.mount) == (100, "/data")
    assert parse_spec(BASE).volume is None


@pytest.mark.parametrize(
    "data, field, hint",
    [
        ({**BASE, "gpus": "A100"}, "gpus", "unknown key"),
        ({**BASE, "resources": {"gpu": "A1000"}}, "resources.gpu", "unknown GPU"),
        ({**BASE, "max_price_per_hour": -1}, "max_price_per_hour", "greater than 0"),
        ({**BASE, "checkpoint": {"store": "ftp://x/y"}}, "checkpoint.store", "file://"),
        ({**BASE, "checkpoint": {"store": "file:///x", "signal": "SIGFOO"}}, "checkpoint.signal", "SIGUSR1"),
        ({**BASE, "resources": {"memory": "lots"}}, "resources.memory", "16GB"),
        ({"run": "x"}, "name", "required"),
        ({**BASE, "name": "Bad Name"}, "name", "lowercase"),
        ({**BASE, "spot_policy": "sometimes"}, "spot_policy", "on-demand"),
        ({**BASE, "env": {"GPUORCH_JOB_ID": "1"}}, "env", "GPUORCH_"),
        ({**BASE, "volume": {"size": "100GB", "mount": "data"}}, "volume.mount", "absolute path"),
        ({**BASE, "volume": {"size": "100GB", "mount": "/"}}, "volume.mount", "absolute path"),
        ({**BASE, "volume": {"size": 0, "mount": "/data"}}, "volume.size", "greater than 0"),
        ({**BASE, "volume": {"mount": "/data"}}, "volume.size", "required"),
        ({**BASE, "volume": {"size": "100GB", "mount": "/data", "type": "gp 2"}}, "volume.type",
         "is not a disk type name"),
    ],
)
def test_bad_specs_give_one_line_naming_the_field(data, field, hint):
    with pytest.raises(UserInputError) as e:
        parse_spec(data, "job.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"job.yaml: {field}:") and hint in msg


def test_malformed_yaml_names_the_line(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("name: x\nrun: [unclosed\n")
    with pytest.raises(UserInputError, match=r"line \d+: malformed YAML"):
        load_spec(p)


def test_workdir_must_exist(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text("name: x\nrun: echo\nworkdir: nope\n")
    with pytest.raises(UserInputError, match="workdir"):
        load_spec(p)


def test_the_daemons_light_copy_of_every_example_spec_reads_as_the_stored_one():
    from pathlib import Path

    from gpuorch.jobs.spec import JobSpec, load_spec, load_stored

    examples = sorted((Path(__file__).resolve().parents[1] / "configs" / "examples").glob("*.yaml"))
    checked = 0
    for path in examples:
        try:
            spec = load_spec(path)
        except Exception:  # a sweep file, not a job spec
            continue
        text = spec.model_dump_json()
        light, full = load_stored(text), JobSpec.model_validate_json(text)
        assert light == full == spec, path.name
        assert fields_sets(light) == fields_sets(full), path.name  # the same sets, only shared
        checked += 1
    assert checked >= 5
    a, b = load_stored(text), load_stored(text)
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__  # one set for every spec


def fields_sets(m: object, path: str = "") -> dict[str, set[str]]:
    from pydantic import BaseModel

    assert isinstance(m, BaseModel)
    out = {path: set(m.model_fields_set)}
    for name, v in m.__dict__.items():
        for k, x in enumerate(v if isinstance(v, list | tuple) else [v]):
            if isinstance(x, BaseModel):
                out.update(fields_sets(x, f"{path}.{name}[{k}]"))
    return out


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("10m", 600.0), ("1.5h", 5400.0), ("1h30m", 5400.0), ("2h 15m", 8100.0), ("1m30s", 90.0),
    ("1d12h", 129600.0), ("1h30min", 5400.0), ("1s500ms", 1.5),
])
def test_durations_read_as_written_including_the_compound_form_limits_print_in(text, seconds):
    assert parse_duration_s(text) == seconds
    assert parse_duration_s(duration_text(seconds)) == round(seconds)  # what status prints reads back


@pytest.mark.parametrize(("text", "words"), [
    ("30m1h", "write it like 30s, 10m, 2h or 1h30m"), ("1h1h", "1h30m"), ("1h30", "1h30m"), ("1h-5m", "1h30m"),
    ("-5m", "is negative; write 0s or more"), ("", "cannot read duration"), ("1e3s", "cannot read duration"),
])
def test_unreadable_durations_say_how_to_write_one(text, words):
    with pytest.raises(ValueError) as e:
        parse_duration_s(text)
    assert words in str(e.value)


@pytest.mark.parametrize(("data", "line"), [
    ({**BASE, "keep_warm": "25h"}, "job.yaml: keep_warm: must be at most 24h; lower it"),
    ({**BASE, "max_duration": "0s"}, "job.yaml: max_duration: must be greater than 0s; raise it"),
    ({**BASE, "checkpoint": {"store": "file:///x", "interval": "99999d"}},
     "job.yaml: checkpoint.interval: must be at most 87840h; lower it"),
    ({**BASE, "resources": {"cpus": 10**9}}, "job.yaml: resources.cpus: must be at most 4096; lower it"),
])
def test_a_duration_s_bound_is_written_as_a_duration_and_other_bounds_as_numbers(data, line):
    with pytest.raises(UserInputError) as e:
        parse_spec(data, "job.yaml")
    assert str(e.value) == line

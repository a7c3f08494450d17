from __future__ import annotations

import pytest

from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import GpuRequirement, SpotPolicy, load_spec, parse_spec

BASE = {"name": "ft", "run": "python train.py"}


def test_minimal_spec_defaults():
    spec = parse_spec(BASE)
    assert spec.spot_policy == SpotPolicy.AUTO and spec.resources.gpu is None
    assert spec.retry.max_preemptions == 20 and spec.checkpoint is None


@pytest.mark.parametrize(
    "text, name, memory, count",
    [
        ("A100:80GB:1", "A100-80GB", 80, 1),
        ("A100:2", "A100", None, 2),
        ("H100:8", "H100", None, 8),
        ("24GB+", None, 24, 1),
        ("48GB+:2", None, 48, 2),
        ("t4", "T4", None, 1),
        ("a100-80gb:4", "A100-80GB", None, 4),
    ],
)
def test_gpu_forms(text, name, memory, count):
    req = GpuRequirement.parse(text)
    assert (req.name, req.min_memory_gib, req.count) == (name, memory, count)


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
        ({**BASE, "volume": {"size": "100GB", "mount": "/data", "type": "gp2"}}, "volume.type", "unknown key"),
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

"""The container command line (``gpuorch.agent.container``): pure functions, plain tests."""

from __future__ import annotations

import pytest

from gpuorch.agent.container import (
    SIGNAL_PROXY,
    ContainerConfig,
    container_env,
    container_name,
    gpu_args,
    parse_image,
    registry_token,
    remove_argv,
    run_argv,
)


@pytest.mark.parametrize("ref, registry, path, tag, digest", [
    ("ubuntu", None, "ubuntu", None, None),
    ("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", None, "pytorch/pytorch", "2.4.0-cuda12.1-cudnn9-runtime", None),
    ("localhost/base", "localhost", "base", None, None),
    ("127.0.0.1:5000/team/train:v1", "127.0.0.1:5000", "team/train", "v1", None),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1", "123456789012.dkr.ecr.us-east-1.amazonaws.com",
     "train", "1", None),
    ("ghcr.io/org/img@sha256:" + "a" * 64, "ghcr.io", "org/img", None, "sha256:" + "a" * 64),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "24.05-py3", None),
])
def test_image_references_parse_as_docker_reads_them(ref, registry, path, tag, digest):
    r = parse_image(ref)
    assert (r.registry, r.path, r.tag, r.digest) == (registry, path, tag, digest)


@pytest.mark.parametrize("ref, why", [
    ("", "empty"),
    ("Ubuntu:22.04", "cannot parse"),  # repository names are lowercase
    ("org/My-Image", "lowercase"),
    ("ubuntu:", "cannot parse"),
    ("ubuntu:22.04 && rm -rf /", "cannot parse"),
    ("ghcr.io/org/img@sha256:abc", "cannot parse"),  # a digest is at least 32 hex digits
    ("a" * 256, "too long"),
])
def test_a_reference_that_does_not_parse_says_what_to_write(ref, why):
    with pytest.raises(ValueError, match=why):
        parse_image(ref)


def argv(**over):
    config = ContainerConfig(image="localhost/base", runtime=["podman", "--runtime", "runc"],
                             run_args=["--ulimit", "nofile=1024:1024"])
    kwargs = dict(name="gpuorch-1-2-running", command="python train.py --lr 'a b'; echo $SECRET",
                  env={"SECRET": "s3cr3t value", "GPUORCH_CHECKPOINT_DIR": "/run/x/work/ckpt"},
                  mounts=["/run/x", "/run/x/work/ckpt", "/data"], workdir="/run/x/work", gpus=False)
    kwargs.update(over)
    return run_argv(config, **kwargs)  # type: ignore[arg-type]


def test_env_values_never_reach_the_command_line():
    a = argv()
    assert "s3cr3t value" not in " ".join(a)
    names = [a[i + 1] for i, x in enumerate(a) if x == "--env"]
    assert names == ["GPUORCH_CHECKPOINT_DIR", "SECRET"]  # by name: the runtime reads the values from its env


def test_the_job_command_is_one_argument_after_the_signal_proxy():
    a = argv()
    assert a[:3] == ["podman", "--runtime", "runc"] and a[3:5] == ["run", "--rm"]
    i = a.index("localhost/base")
    assert a[i - 2:i] == ["--entrypoint", "/bin/sh"]
    assert a[i + 1:] == ["-c", SIGNAL_PROXY, "gpuorch-job", "python train.py --lr 'a b'; echo $SECRET", "USR1",
                         "10", ""]
    assert argv(signal="sigterm")[-3:-1] == ["TERM", "15"]
    assert argv(setup="pip install -r requirements.txt")[-1] == "pip install -r requirements.txt"
    with pytest.raises(ValueError):
        argv(signal="USR1; rm -rf /")
    assert a[a.index("--ulimit") + 1] == "nofile=1024:1024" and a.index("--ulimit") < i  # host flags before the image


def test_directories_are_mounted_at_their_own_path_and_nested_ones_once():
    a = argv()
    mounts = [a[i + 1] for i, x in enumerate(a) if x == "--volume"]
    assert mounts == ["/data:/data", "/run/x:/run/x"]  # /run/x/work/ckpt is inside /run/x
    assert a[a.index("--workdir") + 1] == "/run/x/work"
    assert a[a.index("--network") + 1] == "host"  # rendezvous and MASTER_ADDR mean the same inside


def test_gpus_through_the_nvidia_toolkit_for_docker_and_cdi_for_podman():
    assert gpu_args(["docker"], True) == ["--gpus", "all"]
    assert gpu_args(["/usr/bin/podman", "--runtime", "runc"], True)[:2] == ["--device", "nvidia.com/gpu=all"]
    assert gpu_args(["docker"], False) == []
    assert "--gpus" in argv(gpus=True) or "nvidia.com/gpu=all" in argv(gpus=True)
    assert "--gpus" not in argv() and "--device" not in argv()


def test_labels_and_names_identify_the_attempt():
    a = argv(labels={"gpuorch.job": "7", "gpuorch.attempt": "2"})
    assert [a[i + 1] for i, x in enumerate(a) if x == "--label"] == ["gpuorch.attempt=2", "gpuorch.job=7"]
    assert container_name(7, 2, "running") == "gpuorch-7-2-running"
    assert container_name(7, 2, "running", node_rank=1) == "gpuorch-7-2-running-n1"
    assert remove_argv(["podman", "--runtime", "runc"], "n") == ["podman", "--runtime", "runc", "rm", "--force", "n"]


def test_the_container_gets_the_jobs_variables_not_the_hosts():
    env = {"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "LR": "0.1",
           "GPUORCH_CHECKPOINT_DIR": "/c", "GPUORCH_RESUMED_FROM": "step-3"}
    assert container_env(env, own=["LR"]) == {"LR": "0.1", "GPUORCH_CHECKPOINT_DIR": "/c",
                                              "GPUORCH_RESUMED_FROM": "step-3"}


@pytest.mark.parametrize("registry, tool, user", [
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com", "aws", "AWS"),
    ("europe-west4-docker.pkg.dev", "gcloud", "oauth2accesstoken"),
    ("gcr.io", "gcloud", "oauth2accesstoken"),
    ("myteam.azurecr.io", "az", "00000000-0000-0000-0000-000000000000"),
])
def test_cloud_registries_get_a_token_from_the_instances_identity(registry, tool, user):
    how = registry_token(registry)
    assert how is not None
    command, username = how
    assert command[0] == tool and username == user
    if tool == "aws":
        assert command[-2:] == ["--region", "eu-west-1"]
    if tool == "az":
        assert command[command.index("--name") + 1] == "myteam"


@pytest.mark.parametrize("registry", [None, "ghcr.io", "localhost", "docker.io", "evil.azurecr.io.example.com"])
def test_other_registries_get_no_cloud_login(registry):
    assert registry_token(registry) is None

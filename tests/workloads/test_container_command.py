"""The container command line (``gpuorch.agent.container``): pure functions, plain tests; and the
registry login each cloud's provider hands the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuorch.agent.container import (
    SIGNAL_PROXY,
    ContainerConfig,
    RegistryLogin,
    container_env,
    container_name,
    gpu_args,
    parse_image,
    remove_argv,
    run_argv,
)
from gpuorch.agent.images import ImageHost
from gpuorch.agent.protocol import AgentConfig
from gpuorch.reconciler.apply.agent_config import with_registry_login
from gpuorch.registry import provider_class
from gpuorch.testing.wrappers import bare_instance


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
    # Two installations on one host: job 7's containers apart (one's agent removes a leftover of its name).
    assert container_name(7, 2, "running", installation="c0ffee0000012345") == "gpuorch-c0ffee000001-7-2-running"
    assert remove_argv(["podman", "--runtime", "runc"], "n") == ["podman", "--runtime", "runc", "rm", "--force", "n"]


def test_the_container_gets_the_jobs_variables_not_the_hosts():
    env = {"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "LR": "0.1",
           "GPUORCH_CHECKPOINT_DIR": "/c", "GPUORCH_RESUMED_FROM": "step-3"}
    assert container_env(env, own=["LR"]) == {"LR": "0.1", "GPUORCH_CHECKPOINT_DIR": "/c",
                                              "GPUORCH_RESUMED_FROM": "step-3"}


# Registry login (issue 32): each cloud's provider package says how its instances log in to its
# own registry (capability ``registry_login``); the agent runs what it is handed, knowing no cloud.
@pytest.mark.parametrize("provider, registry, tool, user", [
    ("aws", "123456789012.dkr.ecr.eu-west-1.amazonaws.com", "aws", "AWS"),
    ("gcp", "europe-west4-docker.pkg.dev", "gcloud", "oauth2accesstoken"),
    ("gcp", "gcr.io", "gcloud", "oauth2accesstoken"),
    ("azure", "myteam.azurecr.io", "az", "00000000-0000-0000-0000-000000000000"),
])
def test_a_clouds_provider_hands_its_registry_login_to_the_agent(provider, registry, tool, user):
    adapter = bare_instance(provider_class(provider))
    assert adapter.capabilities.registry_login
    how = adapter.registry_login(registry)
    assert how is not None and how.registry == registry
    assert how.token_argv[0] == tool and how.username == user
    if tool == "aws":
        assert how.token_argv[-2:] == ["--region", "eu-west-1"]
    if tool == "az":
        assert how.token_argv[how.token_argv.index("--name") + 1] == "myteam"
    others = {"aws", "gcp", "azure"} - {provider}
    assert all(bare_instance(provider_class(o)).registry_login(registry) is None for o in others)


@pytest.mark.parametrize("registry", ["ghcr.io", "localhost", "docker.io", "evil.azurecr.io.example.com",
                                      "123456789012.dkr.ecr.eu-west-1.amazonaws.com.example.com"])
@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_other_registries_get_no_cloud_login(provider, registry):
    assert bare_instance(provider_class(provider)).registry_login(registry) is None


def test_the_daemon_puts_the_providers_login_into_the_agents_config_and_it_survives_json():
    cfg = AgentConfig(job_id=1, attempt=1, job_name="j", run="true",
                      container=ContainerConfig(image="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"))
    with_registry_login(cfg, bare_instance(provider_class("aws")))
    assert cfg.container is not None and cfg.container.login is not None
    again = AgentConfig.from_json(cfg.to_json())
    assert again.container == cfg.container and isinstance(again.container.login, RegistryLogin)
    local = AgentConfig(job_id=1, attempt=1, job_name="j", run="true", container=ContainerConfig(image="ubuntu"))
    assert with_registry_login(local, bare_instance(provider_class("local"))).container.login is None


def test_the_agent_runs_the_login_it_was_handed_then_pulls(tmp_path):
    """A real runtime client stand-in (a script recording its calls): the image is absent, so the
    agent logs in with the handed command's token on stdin (never on a command line), then pulls."""
    calls = tmp_path / "calls"
    runtime = tmp_path / "runtime"
    runtime.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$1 $2" in "image inspect") exit 1;; "login --username") cat >> {calls}; echo >> {calls};; esac
exit 0
""")
    runtime.chmod(0o755)
    login = RegistryLogin(registry="registry.example.com", token_argv=["sh", "-c", "echo s3cret"], username="bot")
    config = ContainerConfig(image="registry.example.com/team/train:1", runtime=[str(runtime)], gpus="none",
                             login=login)
    ImageHost.prepare(config, tmp_path)
    assert calls.read_text().splitlines() == [
        "image inspect registry.example.com/team/train:1",
        "login --username bot --password-stdin registry.example.com", "s3cret",
        "pull registry.example.com/team/train:1"]
    calls.unlink()
    ImageHost.prepare(ContainerConfig(image="ghcr.io/x/y:1", runtime=[str(runtime)], gpus="none", login=login),
                      tmp_path)  # another registry than the login's: no login
    assert [c.split()[0] for c in calls.read_text().splitlines()] == ["image", "pull"]


def test_the_agents_container_code_names_no_cloud():
    import gpuorch.agent.container
    import gpuorch.agent.images

    for module in (gpuorch.agent.container, gpuorch.agent.images):
        text = Path(module.__file__ or "").read_text().lower()
        assert not [w for w in ("ecr", "azurecr", "pkg.dev", "gcr.io", "gcloud", "az acr", "amazonaws")
                    if w in text], module.__name__

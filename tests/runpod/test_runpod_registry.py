"""Private images on RunPod (issue 33): the image's registry login from the standard chain
(``registries.<host>`` with a named secret variable, else docker's config.json), saved in the
account as a registry auth and named by the deploy (``containerRegistryAuthId``). With it the pod
pulls and runs; a declared registry whose secret is not set fails the attempt at launch in one
line naming the variable; the secret never reaches the store, the logs or the job's env."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
from fake_runpod import FakeRunpod
from sqlmodel import select

from gpuorch.errors import PermanentError, UserInputError
from gpuorch.provider import LaunchRequest
from gpuorch.provider.registry_creds import credential_for, registry_findings
from gpuorch.store.models import Attempt, Event, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_runpod.config import parse_options
from gpuorch_runpod.provider import RunpodProvider
from tests.kit.agents import Agent

pytestmark = [pytest.mark.runpod, pytest.mark.timeout(120)]
IMAGE = "ghcr.io/acme/private-train:2"
TOKEN = "ghp_s3cretT0ken"


def docker_config(path: Path, host: str, user: str, password: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    (path / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path / "config.json"


def provider(fake: FakeRunpod, home: Path, **options: object) -> RunpodProvider:
    return RunpodProvider(parse_options({"api_url": fake.url, **options}), "rpa_TESTKEY0123456789", home=home,
                          sleep=lambda s: None)


def launch(rp: RunpodProvider, job: int, image: str = IMAGE):
    offer = next(o for o in rp.offers() if o.gpu == "RTX4090" and o.region == "community" and o.gpu_count == 1)
    return rp.launch(LaunchRequest(job_id=job, attempt=1, offer=offer, spot=False, owner="abc123", image=image))


def test_the_chain_reads_a_named_variable_then_dockers_config(tmp_path: Path) -> None:
    secrets = parse_options({"registries": {"ghcr.io": {"username": "acme", "password_env": "GHCR_TOKEN"}}})
    cred = credential_for(IMAGE, "runpod", secrets.registries, env={"GHCR_TOKEN": TOKEN})
    assert (cred.host, cred.username, cred.password) == ("ghcr.io", "acme", TOKEN) and TOKEN not in repr(cred)
    cfg = docker_config(tmp_path / "docker", "https://index.docker.io/v1/", "hubuser", "hubpass")
    hub = credential_for("acme/private:1", "runpod", {}, env={"DOCKER_CONFIG": str(cfg.parent)})
    assert (hub.host, hub.username, hub.password) == ("docker.io", "hubuser", "hubpass")
    assert credential_for("pytorch/pytorch:2.4.0", "runpod", {}, str(tmp_path / "none.json"), env={}) is None
    helper = tmp_path / "helper.json"
    helper.write_text(json.dumps({"auths": {"ghcr.io": {}}, "credsStore": "desktop"}))
    with pytest.raises(PermanentError, match=r"credential helper .* set providers.runpod.registries.ghcr.io"):
        credential_for(IMAGE, "runpod", {}, str(helper), env={})


def test_doctor_says_whether_each_declared_secret_is_set_never_its_value() -> None:
    declared = parse_options({"registries": {"ghcr.io": {"username": "acme", "password_env": "GHCR_TOKEN"},
                                             "docker.io": {"username": "acme", "password_env": "HUB_TOKEN"}}})
    found = registry_findings("runpod", declared.registries, env={"GHCR_TOKEN": TOKEN})
    assert [(f.status, f.message) for f in found] == [("fail", "docker.io: $HUB_TOKEN is not set"),
                                                      ("ok", "ghcr.io: user acme, password from $GHCR_TOKEN")]
    assert all(TOKEN not in f"{f.message} {f.fix}" for f in found)


def test_bad_registry_options_are_refused_naming_the_field() -> None:
    for bad, word in [({"GHCR.IO/x": {"username": "a", "password_env": "T"}}, "registry host"),
                      ({"ghcr.io": {"username": "a", "password_env": "lower-case"}}, "environment variable"),
                      ({"ghcr.io": {"username": "a b", "password_env": "T"}}, "user name"),
                      ({"ghcr.io": {"username": "a", "password": "inline"}}, "password")]:
        with pytest.raises(UserInputError, match=r"providers.runpod.*registries") as e:
            parse_options({"registries": bad})
        assert word in str(e.value) and "\n" not in str(e.value)


def test_a_private_image_pulls_with_the_saved_auth_found_again_after_a_restart(tmp_path: Path, fake: FakeRunpod,
                                                                               monkeypatch, caplog) -> None:
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_config(tmp_path / "docker", "ghcr.io", "acme", TOKEN).parent))
    caplog.set_level(logging.DEBUG)
    rp = provider(fake, tmp_path / "home")
    inst = launch(rp, 1)
    [auth_id] = fake.registry_auths
    assert fake.registry_auths[auth_id] == {"name": "gpuorch-abc123-ghcr-io", "username": "acme", "password": TOKEN}
    assert fake.pods[inst.id].body["containerRegistryAuthId"] == auth_id and fake.pods[inst.id].port is not None
    launch(rp, 2)  # the same secret: neither saved nor listed again
    assert (fake.calls.count("saveRegistryAuth"), fake.calls.count("updateRegistryAuth")) == (1, 0)
    rp.close()
    again = provider(fake, tmp_path / "home")  # a restart: found by its name, refreshed with today's secret
    launch(again, 3)
    assert list(fake.registry_auths) == [auth_id] and fake.calls.count("updateRegistryAuth") == 1
    assert fake.pull_denied == [] and len(fake.live()) == 3
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    again.close()


def test_a_private_image_without_its_login_never_starts(tmp_path: Path, fake: FakeRunpod, monkeypatch) -> None:
    """Undeclared and not in docker's config: pulled anonymously, as RunPod would, and refused."""
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    rp = provider(fake, tmp_path / "home")
    inst = launch(rp, 1)
    assert "containerRegistryAuthId" not in fake.pods[inst.id].body and fake.pull_denied == [IMAGE]
    assert rp.get(inst.id).host is None  # no runtime: the daemon's boot timeout ends it
    rp.close()


def daemon_job(tmp_path: Path, fake: FakeRunpod, monkeypatch, token: str | None) -> tuple[list[Attempt], str]:
    """A private-image job through the assembled daemon, the registry declared with its secret's
    variable (set to ``token``, or unset): its attempts, and everything the store holds as text."""
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    if token is None:
        monkeypatch.delenv("GHCR_TOKEN", raising=False)
    else:
        monkeypatch.setenv("GHCR_TOKEN", token)
    config = {"providers": {"runpod": {"api_url": fake.url, "clouds": ["community"], "registries": {
        "ghcr.io": {"username": "acme", "password_env": "GHCR_TOKEN"}}}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        agents: dict[str, Agent] = {}
        monkeypatch.setattr(d.adapter("runpod"), "runner", lambda inst: agents.setdefault(inst.id, Agent()))
        job = d.submit({"name": "private", "image": IMAGE, "run": "python train.py", "spot_policy": "on-demand",
                        "resources": {"gpu": "RTX4090:1"}, "providers": ["runpod"]})
        if token is None:
            d.until(lambda: [a for a in d.attempts(job) if a.ended_at is not None], timeout_s=60,
                    what="the attempt to end")
        else:
            d.until(lambda: next((a for a in agents.values() if a.started), None), timeout_s=60,
                    what="the pod's agent to start")
        with d.store.read() as s:
            stored = json.dumps([[e.message, e.data] for e in s.exec(select(Event)).all()]
                                + [[a.message, a.instance_id] for a in s.exec(select(Attempt)).all()])
        return d.attempts(job), stored


def test_the_daemon_launches_a_private_image_with_its_declared_login(tmp_path: Path, fake: FakeRunpod,
                                                                      monkeypatch) -> None:
    attempts, stored = daemon_job(tmp_path, fake, monkeypatch, TOKEN)
    [pod] = fake.live()
    assert attempts[0].instance_id == pod.id and pod.body["containerRegistryAuthId"] in fake.registry_auths
    assert fake.pull_denied == [] and TOKEN not in stored
    assert all(TOKEN not in e["value"] for e in pod.body["env"])  # not in the job's env either


def test_without_its_secret_the_attempt_fails_in_one_line_naming_the_variable(tmp_path: Path, fake: FakeRunpod,
                                                                             monkeypatch) -> None:
    attempts, _ = daemon_job(tmp_path, fake, monkeypatch, None)
    first = attempts[0]
    assert first.reason == TerminationReason.LAUNCH_FAILED and not fake.pods
    assert "\n" not in (first.message or "") and "$GHCR_TOKEN is not set" in (first.message or "")
    assert "export the registry's password or token as GHCR_TOKEN" in (first.message or "")

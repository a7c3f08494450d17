"""Private images on Vast (issue 33): the registry login from the standard chain rides in
create-instance's ``image_login`` (docker login arguments), so the host's docker pulls the image.
Without it the host cannot pull (the fake keeps the instance loading with docker's refusal in
``status_msg``): the adapter says so (``Instance.failure``) and the daemon ends the attempt with the
market's message at once, destroying the instance, with no relaunch; a declared registry whose
secret is not set fails the attempt before anything is rented, in one line naming the variable;
the secret never reaches the logs (the RunPod tests check the store too)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fake_vast import FakeVast

from gpuorch.errors import PermanentError
from gpuorch.provider import InstanceState, LaunchRequest
from gpuorch.store.models import TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch_vast.config import parse_options
from gpuorch_vast.provider import VastProvider

pytestmark = [pytest.mark.vast, pytest.mark.timeout(120)]
IMAGE = "ghcr.io/acme/private-train:2"
TOKEN = "ghp_s3cretT0ken"
DECLARED = {"ghcr.io": {"username": "acme", "password_env": "GHCR_TOKEN"}}


def provider(fake: FakeVast, home: Path, **options: object) -> VastProvider:
    return VastProvider(parse_options({"server_url": fake.url, "max_attempts": 3, "retry_max_s": 5, **options}),
                        "fake-vast-key-0123456789abcdef", home=home, sleep=lambda s: None)


def launch(v: VastProvider, job: int):
    offer = next(o for o in v.offers() if o.instance_type.endswith("x1") and o.region == "US")
    return v.launch(LaunchRequest(job_id=job, attempt=1, offer=offer, spot=False, owner="abc", image=IMAGE))


def test_a_private_image_is_rented_with_its_docker_login_and_runs(tmp_path: Path, fake: FakeVast, monkeypatch,
                                                                  caplog) -> None:
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("GHCR_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    v = provider(fake, tmp_path / "home", registries=DECLARED)
    inst = launch(v, 1)
    assert fake.logins[int(inst.id)] == f"-u acme -p {TOKEN} ghcr.io" and fake.pull_denied == []
    assert v.get(inst.id).state == InstanceState.RUNNING
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    v.close()


def test_without_a_login_the_host_cannot_pull_it(tmp_path: Path, fake: FakeVast, monkeypatch) -> None:
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    v = provider(fake, tmp_path / "home")
    inst = launch(v, 1)
    assert int(inst.id) not in fake.logins and fake.pull_denied == [IMAGE]
    seen = v.get(inst.id)
    assert seen.state == InstanceState.PENDING  # Vast retries the pull: alive, the daemon destroys it
    assert seen.failure == (f"vast: the host cannot start the image: Error response from daemon: pull access denied "
                            f"for {IMAGE}, repository does not exist or may require 'docker login'")
    v.close()


def test_the_daemon_fails_an_unpullable_image_at_the_pull_with_the_markets_message(tmp_path: Path, fake: FakeVast,
                                                                                  monkeypatch) -> None:
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    config = {"providers": {"vast": {"server_url": fake.url}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        job = d.submit({"name": "private", "image": IMAGE, "run": "python train.py", "spot_policy": "on-demand",
                        "resources": {"gpu": "RTX4090:1"}, "providers": ["vast"]})
        final = d.until_terminal(job, timeout_s=60)  # long before the 900 s boot timeout
        attempts = d.attempts(job)
    assert final.status.value == "failed"
    assert [a.reason for a in attempts] == [TerminationReason.FAILED]  # one rent, no relaunch
    message = attempts[0].message or ""
    assert "pull access denied for ghcr.io/acme/private-train:2" in message and "\n" not in message
    assert fake.rented_images == [IMAGE] and not fake.instances  # destroyed: nothing left billing


def test_a_declared_registry_without_its_secret_or_with_an_unsafe_one_rents_nothing(tmp_path: Path, fake: FakeVast,
                                                                                   monkeypatch) -> None:
    monkeypatch.delenv("GHCR_TOKEN", raising=False)
    v = provider(fake, tmp_path / "home", registries=DECLARED)
    with pytest.raises(PermanentError, match=r"\$GHCR_TOKEN is not set; export .* as GHCR_TOKEN") as e:
        launch(v, 1)
    assert e.value.code == "RegistryAuth.Missing" and "\n" not in str(e.value)
    monkeypatch.setenv("GHCR_TOKEN", "two words")
    with pytest.raises(PermanentError, match="cannot carry") as e:
        launch(v, 2)
    assert "two words" not in str(e.value)
    assert not fake.instances
    v.close()


def test_the_daemon_fails_the_attempt_in_one_line_naming_the_variable(tmp_path: Path, fake: FakeVast,
                                                                     monkeypatch) -> None:
    fake.private_images[IMAGE] = ("acme", TOKEN)
    monkeypatch.delenv("GHCR_TOKEN", raising=False)
    config = {"providers": {"vast": {"server_url": fake.url, "registries": DECLARED}}}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        job = d.submit({"name": "private", "image": IMAGE, "run": "python train.py", "spot_policy": "on-demand",
                        "resources": {"gpu": "RTX4090:1"}, "providers": ["vast"]})
        first = d.until(lambda: next((a for a in d.attempts(job) if a.ended_at is not None), None), timeout_s=60,
                        what="the attempt to end")
    assert first.reason == TerminationReason.LAUNCH_FAILED and not fake.instances
    assert "\n" not in (first.message or "") and "$GHCR_TOKEN is not set" in (first.message or "")

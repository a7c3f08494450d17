"""No silent drops: a job with ``volume:`` is placed only on providers that have volumes, and
``submit`` and ``plan`` refuse it with one line when none of its allowed providers has any.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

import json
import sys

import pytest
from test_reconciler import drive, submit
from typer.testing import CliRunner

import gpuorch.cli  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import parse_spec
from gpuorch.jobs.submitcheck import volume_scope
from gpuorch.provider.port import SupportsVolumes
from gpuorch.reconciler import Reconciler
from gpuorch.registry import available, with_volumes
from gpuorch.testing.e2e import attempts
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, default_offers

VOLUME = {"size": "100GB", "mount": "/data"}


class NoVolumes(FakeProvider):
    """The fake without the capability (``None`` members take a class out of a runtime Protocol)."""

    create_volume = attach_volume = detach_volume = delete_volume = list_volumes = None  # type: ignore[assignment]


def test_a_volume_job_is_placed_on_a_provider_with_volumes_though_another_is_cheaper(store, clock) -> None:
    assert sys.version_info >= (3, 11)
    cheap = [o.model_copy(update={"price_per_hour": o.price_per_hour / 10,
                                  "spot_price_per_hour": (o.spot_price_per_hour or 1) / 10})
             for o in default_offers("plain")]
    plain = NoVolumes(clock, cheap, name="plain", script=FakeJobScript(duration_s=300))
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=300))
    assert not isinstance(plain, SupportsVolumes) and isinstance(fake, SupportsVolumes)
    rec = Reconciler(store, {"plain": plain, "fake": fake}, clock=clock)
    with_volume, without = submit(store, clock, volume=VOLUME), submit(store, clock)
    drive(rec, clock, 30)
    assert [a.provider for a in attempts(store, with_volume.id)] == ["fake"]
    assert [a.provider for a in attempts(store, without.id)] == ["plain"]  # the cheaper one, as before
    assert len(fake.list_volumes()) == 1


def test_volume_scope_narrows_to_the_providers_with_volumes_or_refuses_in_one_line() -> None:
    spec = parse_spec({"name": "v", "run": "x", "volume": VOLUME})
    assert volume_scope(spec, ["aws", "local"], ["aws", "gcp"], "job.yaml").providers == ["aws"]
    plain = spec.model_copy(update={"volume": None})
    assert volume_scope(plain, ["local"], [], "job.yaml") is plain
    with pytest.raises(UserInputError) as e:
        volume_scope(spec.model_copy(update={"providers": ["local"]}), ["aws", "local"], ["aws", "azure", "gcp"],
                     "job.yaml")
    assert str(e.value) == ("job.yaml: volume: none of the providers this job may use (local) has volumes; "
                            "allow one that does (providers: [...]): aws, azure, gcp")


def test_plan_places_a_volume_job_only_where_volumes_are_and_refuses_it_elsewhere(tmp_path) -> None:
    runner = CliRunner()
    spec = tmp_path / "v.yaml"
    spec.write_text("name: v\nrun: x\nresources: {gpu: 'A100:80GB:1'}\nvolume: {size: 100GB, mount: /data}\n")
    data = json.loads(runner.invoke(app, ["plan", str(spec), "--price-list", "--json"]).stdout)
    # attached volumes (aws, gcp, azure, sim) or volumes given at launch (lambda, runpod, vast)
    assert {c["provider"] for c in data["candidates"]} <= {"aws", "gcp", "azure", "sim", "lambda", "runpod", "vast"}
    local = tmp_path / "local.yaml"
    local.write_text(spec.read_text() + "providers: [local]\n")
    r = runner.invoke(app, ["plan", str(local), "--price-list"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().startswith(f"error: {local}: volume: none of the providers this job may use (local) "
                                       "has volumes; allow one that does (providers: [...]): aws, gcp")


def test_submit_refuses_a_volume_job_nowhere_to_put_its_volume_and_stores_nothing(_isolated_home, tmp_path) -> None:
    runner = CliRunner()
    job = tmp_path / "job.yaml"
    job.write_text("name: v\nrun: x\nresources: {gpu: 'L4:1'}\nvolume: {size: 100GB, mount: /data}\n")
    r = runner.invoke(app, ["submit", str(job)])  # the default config enables only `local`: no volumes
    assert r.exit_code == 2 and r.stdout == ""
    makers = with_volumes(available())  # the installed providers that make volumes, in name order
    assert {"aws", "azure", "gcp", "lambda", "runpod", "sim", "vast"} <= set(makers) and "local" not in makers
    assert r.stderr.strip() == (f"error: {job}: volume: none of the providers this job may use (local) has volumes; "
                                f"allow one that does (providers: [...]): {', '.join(makers)}")
    (_isolated_home / "config.yaml").write_text(
        "providers:\n  local: {}\n  gcp: {project: my-project-123, zones: [us-central1-a], volume_type: pd-ssd}\n")
    small = tmp_path / "small.yaml"
    small.write_text(job.read_text().replace("100GB", "5GB"))
    r = runner.invoke(app, ["submit", str(small)])
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {small}: volume.size: 5 GiB is outside what the providers can create "
                                "(gcp 10 to 65536 GiB); choose a size in a range")
    assert json.loads(runner.invoke(app, ["status", "--json"]).stdout)["jobs"] == []  # nothing stored
    ok = runner.invoke(app, ["submit", str(job), "--json"])
    assert ok.exit_code == 0, ok.output

"""Metrics: the provider wrapper, the store-derived families, and a real daemon scraped over HTTP.

Bare Reconciler: the metrics wrapper and collectors are under test, around providers the test
builds (the FakeProvider, a fake clock).
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest
from daemon_proc import CONFIG, DaemonProcess, wait_until
from prometheus_client.parser import text_string_to_metric_families

from gpuorch.clock import utcnow
from gpuorch.errors import TransientError
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.metrics import Metrics
from gpuorch.money.cost import attempt_cost
from gpuorch.provider.port import SupportsPreemptionInjection
from gpuorch.reconciler import Reconciler
from gpuorch.store import Store
from gpuorch.store.models import Job, JobStatus
from gpuorch.testing.e2e import job_status
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider
from gpuorch_local.provider import LocalProvider

SPEC = {"name": "train", "run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
        "checkpoint": {"store": "file:///tmp/ckpt", "interval": "60s"}, "retry": {"max_preemptions": 3}}


def sample(registry, name, **labels):
    return registry.get_sample_value(name, labels) or 0.0


def test_the_wrapper_counts_calls_and_errors_and_keeps_capabilities(store, clock):
    m = Metrics(store, clock)
    fake = FakeProvider(clock)
    p = m.instrument({"fake": fake})["fake"]
    assert isinstance(p, SupportsPreemptionInjection) and p.name == "fake"
    fake.fail_next("list_managed", TransientError("throttled", code="RequestLimitExceeded"))
    with pytest.raises(TransientError):
        p.list_managed()
    assert p.list_managed() == []
    with pytest.raises(KeyError):  # an untranslated error is counted too, as "unexpected"
        p.inject_preemption("i-nope", notice_s=1)
    r = m.registry
    assert sample(r, "gpuorch_provider_calls_total", provider="fake", method="list_managed") == 2
    assert sample(r, "gpuorch_provider_call_errors_total", provider="fake", method="list_managed",
                  kind="transient", code="RequestLimitExceeded") == 1
    assert sample(r, "gpuorch_provider_call_errors_total", provider="fake", method="inject_preemption",
                  kind="unexpected", code="KeyError") == 1


def test_job_families_come_from_the_store(store, clock):
    m = Metrics(store, clock)
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=300, checkpoint_every_s=60))
    rec = Reconciler(store, m.instrument({"fake": fake}), clock=clock)
    job = jobs.submit(store, parse_spec(SPEC), clock.now())
    jobs.submit(store, parse_spec({**SPEC, "name": "waiting", "providers": ["nowhere"]}), clock.now())
    for _ in range(30):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        [a1] = jobs.attempts_of(s, job.id)
    fake.inject_preemption(a1.instance_id, notice_s=60)
    for _ in range(200):
        rec.run_pass()
        clock.advance(5)
    with store.read() as s:
        assert s.get(Job, job.id).status == JobStatus.SUCCEEDED
        spend = sum(attempt_cost(a, clock.now()) for a in jobs.attempts_of(s, job.id))
    r = m.registry
    assert sample(r, "gpuorch_jobs", state="succeeded") == 1 and sample(r, "gpuorch_jobs", state="queued") == 1
    assert sample(r, "gpuorch_jobs", state="running") == 0
    assert sample(r, "gpuorch_attempts_total", reason="preempted") == 1
    assert sample(r, "gpuorch_attempts_total", reason="succeeded") == 1
    assert sample(r, "gpuorch_preemptions_total") == 1
    assert spend > 0 and sample(r, "gpuorch_spend_usd_total", provider="fake") == pytest.approx(spend)
    assert sample(r, "gpuorch_store_up") == 1
    assert sample(r, "gpuorch_provider_calls_total", provider="fake", method="launch") == 2


def test_an_unreadable_store_is_reported_not_raised(store, clock):
    import sqlite3

    m = Metrics(store, clock)
    with sqlite3.connect(store.url.removeprefix("sqlite:///")) as db:  # a database that lost a table
        db.execute("DROP TABLE job")
    assert sample(m.registry, "gpuorch_store_up") == 0
    assert m.registry.get_sample_value("gpuorch_jobs", {"state": "queued"}) is None


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_a_real_daemon_serves_metrics_on_loopback(tmp_path, _isolated_home):
    home = _isolated_home
    local = LocalProvider(home / "local")
    cheapest = min((o for o in local.offers() if o.gpu == "A100-80GB" and o.gpu_count == 1),
                   key=lambda o: o.price_per_hour)
    local.set_capacity(cheapest.zone, cheapest.instance_type, spot=False, available=False)
    store = Store(f"sqlite:///{home / 'state.db'}")
    d = DaemonProcess(home, config=CONFIG + "metrics: {port: 0}\n")
    try:
        d.ready()
        url = wait_until(lambda: next((m["metrics_url"] for m in d.log() if "metrics_url" in m), None),
                         what="the metrics URL in the log")
        assert url.startswith("http://127.0.0.1:")
        job = jobs.submit(store, parse_spec({"name": "quick", "run": "echo hi", "spot_policy": "on-demand",
                                             "resources": {"gpu": "A100:80GB:1"}}), utcnow())
        wait_until(lambda: job_status(store, job.id).terminal, what="the job to end")
        d.passes(1)
        got = scrape(url)
    finally:
        d.close()
        store.close()
    assert job_status(Store(store.url), job.id) == JobStatus.SUCCEEDED
    assert got[("gpuorch_jobs", (("state", "succeeded"),))] == 1
    assert got[("gpuorch_attempts_total", (("reason", "succeeded"),))] == 1
    assert got[("gpuorch_attempts_total", (("reason", "no_capacity"),))] == 1
    assert got[("gpuorch_provider_call_errors_total", (("code", "InsufficientInstanceCapacity"),
                ("kind", "no_capacity"), ("method", "launch"), ("provider", "local")))] == 1
    assert got[("gpuorch_provider_calls_total", (("method", "launch"), ("provider", "local")))] == 2
    assert got[("gpuorch_spend_usd_total", (("provider", "local"),))] > 0
    assert got[("gpuorch_preemptions_total", ())] == 0
    assert got[("gpuorch_reconcile_pass_duration_seconds_count", ())] >= 1
    assert got[("gpuorch_reconcile_passes_total", (("outcome", "ok"),))] >= 1


def test_the_cli_never_imports_prometheus_client(_isolated_home):
    code = ("import sys; from gpuorch.cli import app; app(['status', '--json'], standalone_mode=False); "
            "sys.exit(1 if 'prometheus_client' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0

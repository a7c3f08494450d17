"""Delivery counts as Prometheus metrics (``gpuorch.metrics.notify_collector``), read from the
outbox when scraped: delivered, failed tries, dropped, pending by route, and the outbox's depth.
The daemon's own registry (``gpuorch.metrics.Metrics``) serves them, in the text format a
Prometheus server scrapes; a real receiver on 127.0.0.1 answers 500 when told to."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from test_delivery import _config, _fail_a_job, _sender

from gpuorch.clock import FakeClock
from gpuorch.metrics import Metrics

pytestmark = pytest.mark.notify


@pytest.fixture
def secret_file(tmp_path, secret):
    p = tmp_path / "webhook.key"
    p.write_text(secret + "\n")
    return p


def test_delivered_failed_dropped_pending_and_depth_are_scraped(store, receiver, secret_file):
    clock = FakeClock()
    sender = _sender(store, _config(receiver, secret_file, backoff_s=1.0, max_tries=3), clock)
    registry = Metrics(store, clock).registry

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    _fail_a_job(store, clock, "one")
    assert value("gpuorch_notification_outbox_depth") == 1  # not routed yet: still to send
    receiver.script = [500]  # the first try fails, the second is delivered
    sender.tick()
    assert value("gpuorch_notifications_pending", route="hook") == 1
    assert value("gpuorch_notification_failures_total", route="hook") == 1
    clock.advance(1.0)
    sender.tick()
    assert value("gpuorch_notifications_delivered_total", route="hook") == 1
    assert value("gpuorch_notification_outbox_depth") == 0

    _fail_a_job(store, clock, "two")
    receiver.script = [500, 500, 500]  # every try fails: dropped after the third
    for _ in range(3):
        sender.tick()
        clock.advance(60.0)
    assert value("gpuorch_notifications_dropped_total", route="hook") == 1
    assert value("gpuorch_notification_failures_total", route="hook") == 4
    assert value("gpuorch_notifications_delivered_total", route="hook") == 1
    assert value("gpuorch_notifications_pending", route="hook") == 0
    text = generate_latest(registry).decode()
    assert 'gpuorch_notifications_dropped_total{route="hook"} 1.0' in text
    assert "gpuorch_notification_outbox_depth 0.0" in text

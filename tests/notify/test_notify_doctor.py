"""``gpuorch doctor`` shows the notifications: its routes (redacted), a route the daemon could not
build, and a delivery dropped after its last try (dead letter), with no secret in any line."""

from __future__ import annotations

import pytest
import yaml
from notify_receiver import Receiver

from gpuorch import doctor
from gpuorch.clock import FakeClock
from gpuorch.jobs import events
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.notify.sender import from_config
from gpuorch.ops.config_sources import load_config
from gpuorch.store import Store

pytestmark = pytest.mark.notify


def _findings(path):
    return [f for f in doctor.run(path) if f.check == "notifications"]


def test_doctor_names_a_dropped_delivery_and_a_route_it_cannot_build(tmp_path, _isolated_home, secret):
    refusing = Receiver(secret, script=[503])
    try:
        key = tmp_path / "key"
        key.write_text(secret)
        token = "pathT0kenSecret"
        url = refusing.url.replace("gpuorch", token)
        path = tmp_path / "daemon.yaml"
        path.write_text(yaml.safe_dump({"metrics": {"enabled": False}, "notifications": {
            "webhooks": [{"url": url, "secret_file": str(key), "name": "ops-hook"}], "max_tries": 1}}))
        config = load_config(path)
        store = Store(config.url)
        clock = FakeClock()
        job = jobs.submit(store, parse_spec({"name": "j", "run": "exit 1", "resources": {"gpu": "A100:80GB:1"}}),
                          clock.now())
        with store.write() as s:
            events.record(s, clock.now(), "failed", "failed", job_id=job.id)
        sender = from_config(config)(store, "daemon")  # type: ignore[misc]
        sender.now = clock.now
        sender.tick()
        store.close()
        found = _findings(path)
        assert [f.status for f in found] == ["ok", "warn"]
        assert "ops-hook" in found[0].message and "127.0.0.1" in found[0].message
        assert "ops-hook" in found[1].message and "dropped after 1 tries" in found[1].message
        assert all(token not in f.message and secret not in f.message for f in found)
        key.write_text("whsec_short")
        [bad] = _findings(path)
        assert bad.status == "fail" and "notifications.webhooks[0].secret_file" in bad.message
    finally:
        refusing.close()

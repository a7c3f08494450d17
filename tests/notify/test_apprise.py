"""An apprise route to a local HTTP endpoint: apprise's own ``json://`` notifier (apprise's
"Custom JSON" service, https://github.com/caronc/apprise/wiki/Notify_Custom_JSON) posts what a
chat would carry to a receiver on 127.0.0.1; a failing endpoint is retried like a webhook, and
the token in its URL never reaches a log line or the store."""

from __future__ import annotations

import json
import logging

import pytest
from notify_receiver import Receiver
from sqlmodel import select

from gpuorch.clock import FakeClock
from gpuorch.jobs import events
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.notify.routes import build_routes
from gpuorch.notify.sender import Sender
from gpuorch.ops.config import NotificationsConfig
from gpuorch.store.models import JobStatus, NotificationDelivery

pytestmark = pytest.mark.notify


@pytest.fixture
def endpoint():
    r = Receiver(None)  # apprise's JSON posts are not signed
    yield r
    r.close()


def _json_url(endpoint: Receiver, token: str) -> str:
    port = endpoint.server.server_address[1]
    return f"json://127.0.0.1:{port}/notify/{token}"


def _fail(store, clock) -> int:
    job = jobs.submit(store, parse_spec({"name": "sft-run", "run": "exit 1", "resources": {"gpu": "A100:80GB:1"}}),
                      clock.now())
    with store.write() as s:
        row = s.get(type(job), job.id)
        row.status, row.exit_code = JobStatus.FAILED, 1
        events.record(s, clock.now(), "failed", "failed 1 time(s)", job_id=job.id)
    return job.id


def test_a_job_failure_reaches_a_chat_through_apprise_json(store, endpoint):
    clock = FakeClock()
    config = NotificationsConfig.model_validate({"apprise": [_json_url(endpoint, "tokenABCDEF")]})
    sender = Sender(store, build_routes(config), config, "daemon", now=clock.now)
    job_id = _fail(store, clock)
    assert sender.tick() == 1
    [got] = endpoint.ok()
    assert got.headers.get("webhook-id") is None  # a chat message, not a signed webhook
    assert f"sft-run ({job_id}) FAILED" in got.verified["title"]
    assert "exit code 1" in got.verified["message"]


def test_a_failing_chat_endpoint_is_retried_and_its_token_is_never_logged(store, endpoint, caplog):
    clock = FakeClock()
    token = "s3cretChatT0ken"
    config = NotificationsConfig.model_validate({"apprise": [_json_url(endpoint, token)], "backoff_s": 1})
    endpoint.script = [500, 502]
    with caplog.at_level(logging.DEBUG):
        sender = Sender(store, build_routes(config), config, "daemon", now=clock.now)
        _fail(store, clock)
        for _ in range(3):
            sender.tick()
            clock.advance(10)
    assert [r.answered for r in endpoint.all()] == [500, 502, 200]
    with store.read() as s:
        d = s.exec(select(NotificationDelivery)).one()
        assert (d.status, d.tries) == ("delivered", 3)
        dump = json.dumps([x.model_dump() for x in s.exec(select(NotificationDelivery))], default=str)
    # What reaches the daemon's log handlers (on the root logger): apprise's own logger does not
    # propagate (pytest's caplog attaches to it directly, so it is left out here).
    ours = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("apprise"))
    assert token not in ours, [x for x in ours.splitlines() if token in x]
    assert token not in dump
    assert "try 1 of 25 failed" in ours

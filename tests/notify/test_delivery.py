"""The outbox's sender against a real receiver on 127.0.0.1 that verifies every request with the
``standardwebhooks`` reference code: signed bodies, one id per event across retries, exponential
back-off on 5xx and timeouts, a dead letter after ``max_tries``, leases between two senders, and
no secret in the logs or the store. A fake clock steps the back-off (``Sender(now=...)``); the
signature's timestamp is the real time, as the receiver's clock judges it."""

from __future__ import annotations

import json
import logging

import pytest
from sqlmodel import select

from gpuorch.clock import FakeClock
from gpuorch.jobs import events
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.notify import outbox
from gpuorch.notify.routes import build_routes
from gpuorch.notify.sender import Sender
from gpuorch.ops.config import NotificationsConfig
from gpuorch.store.models import Event, JobStatus, Notification, NotificationDelivery

pytestmark = pytest.mark.notify


def _config(receiver, secret_file, **extra) -> NotificationsConfig:
    return NotificationsConfig.model_validate(
        {"webhooks": [{"url": receiver.url, "secret_file": str(secret_file), "timeout_s": 0.5, "name": "hook"}],
         **extra})


@pytest.fixture
def secret_file(tmp_path, secret):
    p = tmp_path / "webhook.key"
    p.write_text(secret + "\n")
    return p


def _sender(store, config, clock, owner="daemon-a") -> Sender:
    return Sender(store, build_routes(config), config, owner, lease_s=5.0, now=clock.now)


def _fail_a_job(store, clock, name="train") -> int:
    job = jobs.submit(store, parse_spec({"name": name, "run": "exit 3", "resources": {"gpu": "A100:80GB:1"}}),
                      clock.now())
    with store.write() as s:
        row = s.get(type(job), job.id)
        row.status, row.exit_code, row.message = JobStatus.FAILED, 3, "failed 1 time(s)"
        events.record(s, clock.now(), "failed", "failed 1 time(s); retry.max_failures is 0", job_id=job.id)
    return job.id


def test_a_failed_job_reaches_the_receiver_signed_with_the_documented_body(store, receiver, secret_file):
    clock = FakeClock()
    sender = _sender(store, _config(receiver, secret_file), clock)
    job_id = _fail_a_job(store, clock)
    assert sender.tick() == 1
    [got] = receiver.ok()
    doc = got.verified  # verified by standardwebhooks.Webhook(secret).verify, as a user's endpoint does
    assert doc["type"] == "job.failed" and doc["schema"] == "gpuorch.notification/v1"
    assert doc["id"] == got.id and got.id.startswith("msg_")
    assert doc["data"]["job"]["id"] == job_id and doc["data"]["job"]["exit_code"] == 3
    assert doc["data"]["job"]["status"] == "failed" and doc["installation"] == store.installation_id
    assert "train" in doc["chat"]["title"]
    with store.read() as s:
        [d] = s.exec(select(NotificationDelivery)).all()
        assert (d.status, d.tries, d.route) == ("delivered", 1, "hook")
    assert sender.tick() == 0  # delivered once: nothing left


def test_a_forged_or_wrong_key_request_is_refused_by_the_receiver(store, receiver, tmp_path):
    """The receiver's check is real: a sender with another key is refused (401), and retried."""
    other = tmp_path / "other.key"
    from notify_receiver import new_secret

    other.write_text(new_secret())
    clock = FakeClock()
    sender = _sender(store, _config(receiver, other), clock)
    _fail_a_job(store, clock)
    sender.tick()
    assert receiver.ok() == [] and [r.answered for r in receiver.all()] == [401]
    assert "No matching signature" in (receiver.all()[0].error or "")


def test_twenty_5xx_then_200_delivers_once_with_one_id_and_doubling_waits(store, receiver, secret_file):
    clock = FakeClock()
    config = _config(receiver, secret_file, backoff_s=2.0, max_backoff_s=60.0, max_tries=25)
    sender = _sender(store, config, clock)
    _fail_a_job(store, clock)
    receiver.script = [500] * 20
    waits = []
    for _ in range(21):
        assert sender.tick() == 1
        with store.read() as s:
            d = s.exec(select(NotificationDelivery)).one()
        if d.status == "delivered":
            break
        assert sender.tick() == 0  # not due before its back-off
        waits.append((d.next_at - clock.now()).total_seconds())
        clock.advance(waits[-1])
    assert waits == [min(60.0, 2.0 * 2 ** i) for i in range(20)]
    assert [r.answered for r in receiver.all()] == [500] * 20 + [200]
    assert len({r.id for r in receiver.all()}) == 1 and len(receiver.ok()) == 1
    assert all(r.verified is not None for r in receiver.all())  # every try signed afresh, and valid


def test_a_receiver_that_never_answers_is_retried_then_dropped_with_an_event(store, receiver, secret_file, caplog):
    clock = FakeClock()
    config = _config(receiver, secret_file, backoff_s=1.0, max_tries=2)
    sender = _sender(store, config, clock)
    _fail_a_job(store, clock)
    receiver.hang_s = 2.0  # longer than timeout_s (0.5): each try times out
    with caplog.at_level(logging.INFO, logger="gpuorch"):
        assert sender.tick() == 1
        clock.advance(1.0)
        assert sender.tick() == 1
        clock.advance(3600)
        assert sender.tick() == 0  # dead: never tried again
    with store.read() as s:
        d = s.exec(select(NotificationDelivery)).one()
        assert (d.status, d.tries) == ("dead", 2) and "timed out" in (d.last_error or "")
        [dead] = s.exec(select(Event).where(Event.kind == "notification_dead")).all()
        assert "hook" in dead.message and "2 tries" in dead.message
        assert outbox.health(s)["dead"][0]["route"] == "hook"
    assert "dropped after the last try" in caplog.text


def test_two_senders_never_hold_one_delivery_at_once_and_a_lapsed_lease_is_taken(store, receiver, secret_file):
    clock = FakeClock()
    config = _config(receiver, secret_file)
    a, b = _sender(store, config, clock, "daemon-a"), _sender(store, config, clock, "daemon-b")
    _fail_a_job(store, clock)
    outbox.route_new(store, list(a.routes.values()), a._build, clock.now())
    held = outbox.claim(store, "daemon-a", a.routes, clock.now(), a.lease_s)
    assert held is not None
    assert outbox.claim(store, "daemon-b", b.routes, clock.now(), b.lease_s) is None  # leased to a
    assert b.tick() == 0
    clock.advance(a.lease_s + 0.5 + 1)  # a died holding it: its lease lapses
    assert b.tick() == 1
    assert [r.id for r in receiver.ok()] == [held.uid]


def test_secrets_stay_out_of_logs_events_and_the_store(store, secret, tmp_path, caplog):
    """A token in the URL's path and the signing key never reach a log line, an event or a row."""
    from notify_receiver import Receiver

    token = "tok3n5ecretValue"
    refusing = Receiver(secret, script=[503] * 5)
    try:
        key = tmp_path / "key"
        key.write_text(secret)
        url = refusing.url.replace("/hooks/gpuorch", f"/hooks/{token}?auth={token}")
        config = NotificationsConfig.model_validate(
            {"webhooks": [{"url": url, "secret_file": str(key)}], "max_tries": 2, "backoff_s": 1})
        clock = FakeClock()
        with caplog.at_level(logging.DEBUG):
            sender = _sender(store, config, clock)
            _fail_a_job(store, clock)
            sender.tick()
            clock.advance(5)
            sender.tick()
        assert len(refusing.all()) == 2
        assert token not in caplog.text and secret not in caplog.text and "127.0.0.1" in caplog.text
        with store.read() as s:
            rows = [*s.exec(select(Event)), *s.exec(select(Notification)), *s.exec(select(NotificationDelivery))]
        dump = json.dumps([r.model_dump() for r in rows], default=str)
        assert token not in dump and secret not in dump and secret.removeprefix("whsec_") not in dump
    finally:
        refusing.close()


def test_a_route_filters_by_event_kind_and_job_name(store, receiver, secret_file):
    clock = FakeClock()
    config = NotificationsConfig.model_validate({"webhooks": [
        {"url": receiver.url, "secret_file": str(secret_file), "name": "train-only", "jobs": ["train-*"]},
        {"url": receiver.url + "?x", "secret_file": str(secret_file), "name": "succeeded-only",
         "events": ["job.succeeded"]}]})
    sender = _sender(store, config, clock)
    _fail_a_job(store, clock, "train-7")
    _fail_a_job(store, clock, "eval-1")
    sender.tick()
    names = sorted(r.verified["data"]["job"]["name"] for r in receiver.ok())
    assert names == ["train-7"]  # the other route wants successes only; this one train-* only

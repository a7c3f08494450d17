"""At least once across crashes: a real ``gpuorch daemon`` process, SIGKILLed by a crash point
around the outbox, then started again. Every notification arrives at least once, with one id
per event, and nothing is invented:

- ``end.recorded``: the attempt's end is committed, the job's failure (and its outbox row) not
  yet: the next daemon records it, once;
- ``notify.claimed``: the row is committed and leased, nothing sent: the lease lapses and the
  next daemon sends it;
- ``notify.sent``: the receiver has it, the delivery is not marked: the next daemon sends it
  again with the same ``webhook-id``, which the receiver de-duplicates.

The daemon that starts after the kill also tells that the earlier one died (``daemon.restarted``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.crashpoints import ENV as CRASH_ENV
from gpuorch.ops.crashpoints import LOG_ENV as CRASH_LOG_ENV
from gpuorch.store import Store
from gpuorch.store.models import Notification

pytestmark = [pytest.mark.notify, pytest.mark.timeout(300)]


def _daemon(home, config_path, env=None) -> subprocess.Popen:
    env = {**os.environ, "GPUORCH_HOME": str(home), **(env or {})}
    log = open(home / "daemon.log", "a")  # noqa: SIM115  (closed with the process by the OS)
    return subprocess.Popen([sys.executable, "-m", "gpuorch", "--config", str(config_path), "daemon"],
                            env=env, stdout=subprocess.DEVNULL, stderr=log)


def _wait(check, what, timeout=120.0):
    deadline = time.monotonic() + timeout  # a safety net, not a timing assertion
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("point", ["end.recorded", "notify.claimed", "notify.sent"])
def test_every_event_arrives_at_least_once_with_one_id_across_a_sigkill(tmp_path, _isolated_home, receiver, secret,
                                                                       point):
    home = _isolated_home
    key = tmp_path / "key"
    key.write_text(secret)
    config = tmp_path / "daemon.yaml"
    config.write_text(yaml.safe_dump({
        "providers": {"local": {}}, "poll_s": 0.2, "max_sleep_s": 0.5, "lease_s": 2, "metrics": {"enabled": False},
        "notifications": {"webhooks": [{"url": receiver.url, "secret_file": str(key), "timeout_s": 1,
                                        "events": ["job.failed", "job.succeeded", "daemon.restarted"]}],
                          "backoff_s": 0.2}}))
    store = Store(f"sqlite:///{home / 'state.db'}")
    spec = {"run": "echo working; exit 3", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"}
    failing = jobs.submit(store, parse_spec({"name": "fails", **spec}), utcnow()).id
    crashes = tmp_path / "crashes.log"
    first = _daemon(home, config, {CRASH_ENV: f"{point}=1", CRASH_LOG_ENV: str(crashes)})
    try:
        assert first.wait(120) == -9, "the crash point was never reached"
    finally:
        if first.poll() is None:
            first.kill()
    assert crashes.read_text().split()[-1] == point  # "<time> <pid> <point>"
    seen_before = [r.id for r in receiver.ok()]
    assert seen_before == ([] if point != "notify.sent" else seen_before[:1]) and len(seen_before) <= 1
    ok = jobs.submit(store, parse_spec({"name": "fine", **spec, "run": "true"}), utcnow()).id  # after the restart
    second = _daemon(home, config)
    try:
        resends = 2 if point == "notify.sent" else 1  # sent before the kill, not marked: sent again
        _wait(lambda: sorted(r.verified["type"] for r in receiver.ok()) == sorted(
            ["daemon.restarted", "job.succeeded"] + ["job.failed"] * resends), "every notification after the restart")
    finally:
        second.terminate()
        second.wait(60)
    with store.read() as s:
        rows = {n.uid: (n.type, n.job_id) for n in s.exec(select(Notification))}
    store.close()
    got = receiver.ok()
    assert {r.id: (r.verified["type"], (r.verified["data"].get("job") or {}).get("id")) for r in got} == rows
    # one id per event, nothing invented; the restart after the kill is told too, once
    assert sorted(rows.values(), key=str) == [("daemon.restarted", None), ("job.failed", failing),
                                              ("job.succeeded", ok)]
    ids = [r.id for r in got if r.verified["type"] == "job.failed"]
    assert len(ids) == resends and len(set(ids)) == 1  # the same id each time
    if point == "notify.sent":
        assert seen_before == ids[:1]

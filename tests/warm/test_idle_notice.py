"""The idle watcher of a warm instance hears the preemption notice the finished agent heard
(``gpuorch.agent.idle``; issue 35: "a notice on an idle warm instance just releases it"): it polls
the same notice source, reports a notice in ``idle.notice`` for the daemon, and keeps its dead-man
switch. Direct calls, real files, no daemon (the daemon's side: test_warm_ssh.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from gpuorch.agent.idle import IDLE_NOTICE, IdleConfig, notice_poller, watch
from gpuorch.agent.protocol import CONFIG_FILE


def config(tmp_path: Path, **fields: object) -> IdleConfig:
    notice = {"kind": "file", "path": str(tmp_path / "notice.json"), "poll_s": 0.05}
    return IdleConfig(run=str(tmp_path / "run"), since=time.time(), poll_s=0.05, **{"notice": notice, **fields})


def in_thread(c: IdleConfig, root: Path) -> tuple[threading.Thread, list[str]]:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(watch(c, root)), daemon=True)
    t.start()
    return t, out


def test_a_notice_heard_while_idle_is_reported_for_the_daemon(tmp_path):
    t, out = in_thread(config(tmp_path), tmp_path)
    time.sleep(0.2)
    assert t.is_alive() and not (tmp_path / IDLE_NOTICE).exists()  # no notice: nothing reported
    (tmp_path / "notice.json").write_text(json.dumps({"deadline": 1234.5}))
    t.join(10)
    assert out == ["noticed"]  # a notice was all it watched (no dead-man switch)
    assert json.loads((tmp_path / IDLE_NOTICE).read_text())["deadline"] == 1234.5


def test_with_a_dead_man_switch_it_reports_and_watches_on_until_the_next_agent(tmp_path):
    c = config(tmp_path, heartbeat_timeout_s=60.0, shutdown_command="touch powered-off")
    (tmp_path / "notice.json").write_text(json.dumps({"deadline": 99.0}))
    t, out = in_thread(c, tmp_path)
    deadline = time.time() + 10
    while not (tmp_path / IDLE_NOTICE).exists() and time.time() < deadline:
        time.sleep(0.02)
    assert json.loads((tmp_path / IDLE_NOTICE).read_text())["deadline"] == 99.0
    assert t.is_alive()  # still the dead-man switch of an idle instance
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / CONFIG_FILE).write_text("{}")  # the next attempt's agent starts there
    t.join(10)
    assert out == ["taken"] and not (tmp_path / "powered-off").exists()


def test_no_notice_source_or_an_unknown_one_leaves_only_the_dead_man_switch(tmp_path):
    assert notice_poller(config(tmp_path, notice=None)) is None
    assert notice_poller(config(tmp_path, notice={"kind": "none"})) is None
    assert notice_poller(config(tmp_path, notice={"kind": "nosuch"})) is None  # logged; never raises
    assert watch(config(tmp_path, notice={"kind": "none"}), tmp_path) == "off"


def test_the_idle_config_round_trips_its_notice_source(tmp_path):
    c = config(tmp_path)
    assert IdleConfig.from_json(c.to_json()) == c
    assert IdleConfig.from_json(json.dumps({"run": "/r"})).notice is None  # an older recycle's idle.json

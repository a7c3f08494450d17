"""The idle watcher of a warm instance (spec ``keep_warm``; docs/money.md, "Warm capacity"): the
dead-man switch of an instance that has no agent.

An SSH runner that recycles an instance for another attempt (``SshRunner.recycle``) moves the
finished run directory aside and starts this, from the agent bundle::

    python -m gpuorch.agent.idle ROOT/idle.json

``idle.json`` (an ``IdleConfig``, written over SFTP: nothing of it is ever in a shell string) names
the run directory the next attempt's agent will use, the previous agent's ``heartbeat_timeout_s``
and ``shutdown_command``. While the instance idles, the daemon keeps touching ``RUN/heartbeat``,
as it does for an agent (``Runner.heartbeat``). The watcher:

- exits as soon as ``RUN/agent.json`` exists: the next attempt's agent runs there, with its own
  dead-man switch;
- runs the shutdown command (``/bin/bash -c``, as the agent does) once no heartbeat came for
  ``heartbeat_timeout_s`` (its own clock against the file's mtime, which the instance's clock
  set: no skew between hosts), then exits: a control host that died no longer pays for an idle
  instance until it comes back;
- first removes the run directories set aside before the newest (``runs/``): the newest stays for
  whoever debugs the last attempt; the older ones would fill the disk over a long sweep;
- polls the preemption notice source the finished agent polled (``notice``, the same poller of
  ``gpuorch.agent.notice``, every ``notice.poll_s``): a spot instance can be reclaimed while it
  idles, and only the instance hears its cloud's metadata notice. A notice is written to
  ``idle.notice`` beside ``idle.json`` (``{"deadline": epoch, "at": epoch}``, atomically), which
  the daemon reads (``SshRunner.idle_notice``) and releases the instance on: no job is given to
  an instance that is about to go.

One watcher per instance (an exclusive ``flock`` on ``idle.lock``: a second start exits at once).
Without a timeout or a shutdown command it only watches the notice (if any), else only prunes.
Stdlib only, like the agent. Its own log is ``idle.log`` beside ``idle.json``; ``idle.state`` says
how it ended (``taken``, ``shutdown`` with the command's exit status, ``noticed`` when a notice
was all it watched, or ``off``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gpuorch.agent.notice import NoticePoller, make_notice_source
from gpuorch.agent.protocol import CONFIG_FILE, HEARTBEAT_FILE, NoticeSource, write_atomic

log = logging.getLogger("gpuorch.agent.idle")

IDLE_FILE = "idle.json"
IDLE_LOG = "idle.log"
IDLE_STATE = "idle.state"
IDLE_LOCK = "idle.lock"
IDLE_NOTICE = "idle.notice"  # beside idle.json: a preemption notice heard while idle (see above)
RUNS_DIR = "runs"  # beside run/: the run directories set aside, one per recycled attempt
MAX_POLL_S = 1.0
SHUTDOWN_TIMEOUT_S = 60.0


@dataclass
class IdleConfig:
    run: str  # the run directory the next attempt's agent uses (absolute)
    heartbeat_timeout_s: float | None = None
    shutdown_command: str | None = None
    since: float = 0.0  # when it went idle (epoch); 0: idle.json's mtime (the instance's clock)
    poll_s: float = MAX_POLL_S
    notice: dict | None = None  # the finished agent's NoticeSource (its fields); None: none to watch

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> IdleConfig:
        data = json.loads(text)
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def prune(root: Path, keep: int = 1) -> list[str]:
    """Remove all but the newest ``keep`` run directories under ``root/runs``; the names removed."""
    runs = root / RUNS_DIR
    try:
        entries = sorted((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    except FileNotFoundError:
        return []
    gone = entries[:-keep] if keep else entries
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return [p.name for p in gone]


def last_heartbeat(config: IdleConfig) -> float:
    """When the daemon last said it is alive: the heartbeat's mtime, never before going idle."""
    try:
        return max(config.since, (Path(config.run) / HEARTBEAT_FILE).stat().st_mtime)
    except FileNotFoundError:
        return config.since


def notice_poller(config: IdleConfig) -> tuple[NoticePoller, float] | None:
    """The notice source's poller and its interval, or None when there is none to watch (kind
    ``none``, or one this bundle cannot read: logged, the dead-man switch still works)."""
    if not config.notice:
        return None
    try:
        source = NoticeSource(**{k: v for k, v in config.notice.items() if k in NoticeSource.__dataclass_fields__})
        if source.kind == "none":
            return None
        poller = make_notice_source(source, Path(config.run))
    except (TypeError, ValueError) as e:
        log.error("cannot watch the preemption notice while idle: %s", e)
        return None
    every = source.poll_s if isinstance(source.poll_s, (int, float)) and source.poll_s > 0 else MAX_POLL_S
    return poller, min(float(every), 60.0)


def report_notice(root: Path, deadline: float) -> None:
    """Write ``idle.notice`` for the daemon: the instance is to be reclaimed at ``deadline``."""
    log.warning("preemption notice while idle: reclaimed at %.3f; reported to the daemon", deadline)
    write_atomic(root / IDLE_NOTICE, json.dumps({"deadline": deadline, "at": time.time()}) + "\n")


def _heard(poller: NoticePoller) -> float | None:
    try:
        return poller.poll()
    except Exception as e:  # a poller never raises; one that does must not end the watch
        log.error("the notice poller failed: %s", e)
        return None


def watch(config: IdleConfig, root: Path) -> str:
    """Watch until the next agent starts (``taken``), the heartbeat stops (``shutdown``), or, with
    no dead-man switch, a notice was reported (``noticed``)."""
    timeout, command = config.heartbeat_timeout_s, config.shutdown_command
    deadman = bool(timeout and command)
    notices = notice_poller(config)
    if not deadman and notices is None:
        return "off"
    taken = Path(config.run) / CONFIG_FILE
    poll = min(config.poll_s, (timeout or 0) / 10 if deadman else MAX_POLL_S, notices[1] if notices else MAX_POLL_S)
    poll, next_notice = max(0.05, poll), 0.0
    while True:
        if taken.exists():
            return "taken"
        now = time.time()
        if notices is not None and now >= next_notice:
            next_notice = now + notices[1]
            deadline = _heard(notices[0])
            if deadline is not None:
                report_notice(root, deadline)
                notices = None  # reported once; the instance is going
                if not deadman:
                    return "noticed"
        if deadman and now - last_heartbeat(config) > (timeout or 0):
            break
        time.sleep(poll)
    if taken.exists():  # an agent started as the heartbeat went stale: it has its own switch
        return "taken"
    log.warning("no heartbeat for %.0f s while idle: running the shutdown command", timeout)
    try:
        done = subprocess.run(["/bin/bash", "-c", command or ""], cwd=str(root), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=SHUTDOWN_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError) as e:
        log.error("the shutdown command failed: %s", e)
        return "shutdown failed"
    log.info("shutdown command exited %d: %s", done.returncode, done.stdout.decode(errors="replace")[-2000:])
    return f"shutdown {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    """``python -m gpuorch.agent.idle ROOT/idle.json``: 0 when done, 64 on bad usage, 0 at once
    when another watcher holds the lock."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpuorch.agent.idle ROOT/idle.json", file=sys.stderr)
        return 64
    path = Path(args[0]).resolve()
    root = path.parent
    handler = logging.FileHandler(root / IDLE_LOG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    with open(root / IDLE_LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another watcher runs: one is enough
        config = IdleConfig.from_json(path.read_text())
        config.since = config.since or path.stat().st_mtime  # written when the instance went idle
        removed = prune(root)
        if removed:
            log.info("removed the older run directories %s", ", ".join(removed))
        log.info("idle since %.3f; watching %s (timeout %s s, notice %s)", config.since, config.run,
                 config.heartbeat_timeout_s, (config.notice or {}).get("kind", "none"))
        outcome = watch(config, root)
        log.info("idle watcher done: %s", outcome)
        write_atomic(root / IDLE_STATE, f"{outcome} {os.getpid()} {time.time():.3f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

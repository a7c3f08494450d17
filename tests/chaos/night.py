"""A simulated night for the chaos test: the sim market replaying a stormy stretch of real traces,
a real ``gpuorch daemon`` subprocess started and SIGKILLed over and over, and the checks.

Everything the checks read is ground truth outside the daemon's own bookkeeping: the instance
records of the sim cloud, the manifests in the checkpoint store (none pruned), the run dirs'
agent status files, and a ledger every job attempt appends to.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import yaml

from gpuorch.agent.protocol import read_status
from gpuorch.checkpoint import list_manifests, open_store
from gpuorch.checkpoint.handoff import read_completed
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import day_start
from gpuorch.money.cost import attempt_cost, cost_between, price_changes
from gpuorch.ops.crashpoints import ENV as CRASH_ENV
from gpuorch.ops.crashpoints import LOG_ENV as CRASH_LOG_ENV
from gpuorch.provider.localdir.instances import Meta
from gpuorch.provider.localdir.procs import marked_pids
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job

DATA = Path(__file__).resolve().parents[1] / "data"
CHAIN_JOB = Path(__file__).with_name("chain_job.py")
# 2023-03-16 ~12:00 UTC onwards: us-east-2a, the cheapest zone, drops 14 times in 11 hours.
START_S = 12720 * 195
SCALE = 600.0  # a 195 s tick lasts a third of a second
# Four zones that come and go (us-east-1d reclaims without notice) and one that mostly stays.
ZONES = ("us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-west-2a")
# How long an instance may bill without a live attempt: a few daemon lives, and at least 30 s of
# wall time. Both must pass, since on a loaded machine a short life may end before its first pass.
ORPHAN_GRACE_S = 30.0
ORPHAN_GRACE_LIVES = 8
BILLED_SLACK_S = 1.0  # seconds an attempt's recorded interval may differ from the sim's, in all
# Caps the night runs under (a job's and the day's): loose enough that every job finishes, checked
# against what the sim billed.
JOB_CAP = 2.0
DAILY_CAP = 40.0


def chain(seed: str, steps: int) -> str:
    """What chain_job.py must report, computed independently."""
    state = hashlib.sha256(seed.encode()).digest()
    for i in range(1, steps + 1):
        state = hashlib.sha256(state + str(i).encode()).digest()
    return state.hex()


@dataclass
class Night:
    home: Path
    rng: random.Random
    faults: float = 0.0
    kills: Counter[str] = field(default_factory=Counter)  # how each daemon life ended
    steps: dict[int, tuple[str, int]] = field(default_factory=dict)  # job id -> (seed, steps)
    daemon: subprocess.Popen[bytes] | None = None
    orphan_since: dict[str, tuple[float, int]] = field(default_factory=dict)  # id -> (time, lives) first seen unowned

    def __post_init__(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "ledger").mkdir(exist_ok=True)
        traces, prices = DATA / "spot-traces" / "aws-p3-2023", DATA / "spot-prices" / "aws-p3-2023"
        sim = {"traces": [f"{z}={traces / f'{z}_v100_1.json'}" for z in ZONES], "prices": str(prices),
               "time_scale": SCALE, "start_s": START_S, "boot_s": 60, "changeover_s": 60, "min_notice_wall_s": 1.5,
               "zones": {"us-east-1d": {"notice_s": 0}, "us-west-2a": {"flavour": "gcp"}}}
        if self.faults:
            sim["faults"] = {"rate": self.faults, "seed": self.rng.randrange(1 << 30)}
        config = {"providers": {"sim": sim}, "poll_s": 0.3, "max_sleep_s": 0.3, "lease_s": 1.0,
                  "heartbeat_timeout_s": 30, "backoff_s": 3, "recovery_strategy": "same-region-first",
                  "avoid_preempted_zone_s": 40, "daily_budget": DAILY_CAP}
        (self.home / "config.yaml").write_text(yaml.safe_dump(config))
        self.store = Store(f"sqlite:///{self.home / 'state.db'}")

    # -- the daemon ------------------------------------------------------------------------
    def start(self, crash: bool) -> subprocess.Popen[bytes]:
        env = {**os.environ, "GPUORCH_HOME": str(self.home), CRASH_LOG_ENV: str(self.home / "crashes.log")}
        env.pop("GPUORCH_DATABASE_URL", None)
        if crash:
            env[CRASH_ENV] = (f"seed={self.rng.randrange(1 << 30)},p=0.003,launch.called=0.1,launch.intent=0.05,"
                              "terminate.called=0.2,drain.recorded=0.2,end.recorded=0.1,orphan.terminated=0.3")
        self.log = self.home / "lives" / f"{sum(self.kills.values()):03d}.log"
        self.log.parent.mkdir(exist_ok=True)
        with open(self.log, "ab") as log:
            self.daemon = subprocess.Popen([sys.executable, "-m", "gpuorch", "daemon"], env=env, stdout=log,
                                           stderr=subprocess.STDOUT)
        return self.daemon

    def life(self, after_start_s: float) -> None:
        """One daemon life with crash points on: SIGKILLed ``after_start_s`` after it is up (its
        imports take a second or two, which no kill needs to hit), unless a crash point got it."""
        proc = self.start(crash=True)
        up = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < up and b" started: " not in self.log.read_bytes():
            time.sleep(0.05)
        try:
            proc.wait(after_start_s)
            self.kills["crashpoint" if proc.returncode == -signal.SIGKILL else f"exit {proc.returncode}"] += 1
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.kills["sigkill"] += 1

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()

    # -- jobs --------------------------------------------------------------------------------
    def submit(self, n: int) -> None:
        for _ in range(n):
            i = len(self.steps)
            seed, steps = f"seed-{i}", self.rng.randrange(200, 400)
            spec = parse_spec({
                "name": f"chain-{i}", "run": f"{sys.executable} {CHAIN_JOB}", "resources": {"gpu": "V100"},
                "env": {"SEED": seed, "STEPS": str(steps), "STEP_S": "0.05", "EVERY": "25",
                        "LEDGER": str(self.home / "ledger" / f"chain-{i}.log")},
                "checkpoint": {"store": (self.home / "ckpt").as_uri(), "interval": "0.5s", "keep": 1000},
                "retry": {"max_preemptions": 200}, "budget": {"max_cost": JOB_CAP},
            })
            job = jobs.submit(self.store, spec, datetime.now(UTC))
            self.steps[job.id] = (seed, steps)  # type: ignore[index]

    def jobs(self) -> list[Job]:
        with self.store.read() as s:
            return [s.get(Job, i) for i in self.steps]  # type: ignore[misc]

    def attempts(self) -> dict[int, list[Attempt]]:
        with self.store.read() as s:
            return {i: jobs.attempts_of(s, i) for i in self.steps}

    def all_done(self) -> bool:
        return all(j.status.terminal for j in self.jobs())

    def wait_morning(self, stuck_s: float) -> None:
        """Until every job ended and no instance is left, checking as it goes. Fails only once
        nothing changed for ``stuck_s`` (no job ended, no attempt added): a loaded machine is only
        slower, a stuck night is reported with where it stood."""
        mark, since = None, time.monotonic()
        while not (self.all_done() and not self.live_instances()):
            self.check_now()
            now_mark = (summary(self), len(self.live_instances()))
            if now_mark != mark:
                mark, since = now_mark, time.monotonic()
            assert time.monotonic() - since < stuck_s, f"no progress for {stuck_s:.0f}s: {summary(self)}"
            assert self.daemon is not None and self.daemon.poll() is None, f"the morning daemon exited: {self.log}"
            time.sleep(0.5)

    # -- ground truth --------------------------------------------------------------------------
    def instances(self) -> list[tuple[Path, Meta]]:
        out = []
        for d in sorted((self.home / "sim" / "instances").glob("sim-*")):
            try:
                out.append((d, Meta.model_validate_json((d / "meta.json").read_text())))
            except (FileNotFoundError, ValueError):
                continue
        return out

    def live_instances(self) -> list[tuple[Path, Meta]]:
        now = datetime.now(UTC)
        return [(d, m) for d, m in self.instances() if m.observed(now).state.alive and not m.preemption_due(now)]

    def ledger(self, job: Job) -> list[tuple[float, int, str, list[str]]]:
        path = self.home / "ledger" / f"{job.name}.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [(float(t), int(a), kind, rest) for t, a, kind, *rest in (line.split() for line in lines)]

    def job_store(self, job: Job):  # type: ignore[no-untyped-def]
        """The job's store and prefix: ``<store>/<installation>/<name>-<id>`` (docs/checkpoints.md)."""
        return open_store((self.home / "ckpt").as_uri() + f"/{self.store.installation_id}/{job.name}-{job.id}")

    def manifests(self, job: Job):  # type: ignore[no-untyped-def]
        return list_manifests(*self.job_store(job))

    # -- checks ------------------------------------------------------------------------------
    def check_now(self) -> None:
        """Never two live attempts for one job, nor two live instances for one attempt, and no
        instance billing for long without a live attempt that owns it (an orphan)."""
        attempts = self.attempts()
        for job_id, rows in attempts.items():
            live = [a.number for a in rows if a.status.live]
            assert len(live) <= 1, f"job {job_id} has live attempts {live}"
        instances = self.live_instances()
        per_attempt = Counter((m.tags.get("gpuorch:job"), m.tags.get("gpuorch:attempt")) for _, m in instances)
        doubled = [k for k, n in per_attempt.items() if n > 1]
        assert not doubled, f"two live instances for attempts {doubled}"
        owned = {(str(j), str(a.number)) for j, rows in attempts.items() for a in rows if a.status.live}
        now = time.monotonic()
        orphans = {m.id for _, m in instances
                   if (m.tags.get("gpuorch:job"), m.tags.get("gpuorch:attempt")) not in owned}
        lives = sum(self.kills.values())
        self.orphan_since = {i: self.orphan_since.get(i, (now, lives)) for i in orphans}
        # A crash between "launch called" and "launch recorded" leaves one until a daemon's orphan
        # sweep (or its adoption by the attempt) a life or two later; never longer.
        stale = [i for i, (t, n) in self.orphan_since.items()
                 if now - t > ORPHAN_GRACE_S and lives - n >= ORPHAN_GRACE_LIVES]
        assert not stale, (f"instances without a live attempt for over {ORPHAN_GRACE_S}s and "
                           f"{ORPHAN_GRACE_LIVES} daemon lives: {stale}")

    def check_money(self) -> dict:
        """Σ attempt costs against what the sim billed: each instance's interval (created to
        ended) at its attempt's prices. Every billed instance belongs to an attempt row; the
        attempts are billed from the cloud's record (gpuorch.money.record), so the two sums differ
        by no more than ``BILLED_SLACK_S`` per attempt at its price, however late each daemon
        life saw a launch or an end. And no cap was crossed by what the sim billed: each job's,
        and the daily one on every UTC day."""
        rows = {(str(j), str(a.number)): a for j, atts in self.attempts().items() for a in atts}
        now = datetime.now(UTC)
        billed = slack = 0.0
        per_job: Counter[str] = Counter()
        per_day: Counter[str] = Counter()
        for _, m in self.instances():
            key = (m.tags.get("gpuorch:job"), m.tags.get("gpuorch:attempt"))
            a = rows.get(key)  # type: ignore[arg-type]
            assert a is not None, f"instance {m.id} billed for {key}, which no attempt row records"
            interval = SimpleNamespace(launched_at=m.created_at, ended_at=m.ended_at or now,
                                       price_per_hour=a.price_per_hour, billing_granularity_s=a.billing_granularity_s,
                                       min_billing_s=a.min_billing_s, price_changes=a.price_changes)
            cost = attempt_cost(interval, now)  # type: ignore[arg-type]
            billed += cost
            per_job[key[0] or ""] += cost
            day = day_start(m.created_at)
            while day < (m.ended_at or now):  # an interval across midnight adds to both days
                per_day[day.date().isoformat()] += cost_between(interval, day, day + timedelta(days=1), now)  # type: ignore[arg-type]
                day += timedelta(days=1)
            slack += BILLED_SLACK_S * max([a.price_per_hour, *(p for _, p in price_changes(a))]) / 3600
        recorded = sum(attempt_cost(a, now) for a in rows.values() if a.launched_at is not None)
        assert abs(recorded - billed) <= slack + 1e-9, f"attempts cost {recorded:.4f}, the sim billed {billed:.4f}"
        over = {j: c for j, c in per_job.items() if c > JOB_CAP + 1e-9}
        assert not over, f"jobs billed over their ${JOB_CAP} cap: {over}"
        assert all(c <= DAILY_CAP + 1e-9 for c in per_day.values()), f"a day billed over ${DAILY_CAP}: {per_day}"
        return {"billed": round(billed, 4), "recorded": round(recorded, 4), "slack": round(slack, 4),
                "max_job": round(max(per_job.values(), default=0.0), 4), "days": dict(per_day)}

    def check_end(self) -> dict:
        """Every job finished exactly once with the right result, every relaunch resumed from the
        latest complete checkpoint, no instance or process left."""
        stats: Counter[str] = Counter()
        for job in self.jobs():
            seed, steps = self.steps[job.id]  # type: ignore[index]
            rows = {a.number: a for a in self.attempts()[job.id]}  # type: ignore[index]
            assert job.status.value == "succeeded", f"{job.name}: {job.status} ({job.message})"
            assert json.loads(job.result or "{}").get("digest") == chain(seed, steps), f"{job.name}: wrong result"
            won = [n for n, a in rows.items() if a.reason and a.reason.value == "succeeded"]
            assert len(won) == 1, f"{job.name}: succeeded attempts {won}"
            events = self.ledger(job)
            # At most once: once a completion is durable (the agent's record, written before it
            # reports), no attempt that starts later runs the job to its end again. (One started
            # before it, on a notice's replacement, may: nothing told it yet.)
            record = read_completed(*self.job_store(job))
            assert record is not None, f"{job.name}: succeeded without a completion record"
            started = {a: t for t, a, kind, _ in events if kind == "start"}
            again = [a for _, a, kind, _ in events if kind == "done" and started.get(a, 0.0) > record.at]
            assert not again, f"{job.name}: attempts {again} started after attempt {record.attempt}'s completion " \
                              "was recorded, and ran the job to its end again"
            for _, attempt, _, _ in (e for e in events if e[2] == "done" and e[1] != won[0]):
                # A finish counts once: another attempt that got there was killed before its agent
                # could report it (an agent that did report means the daemon ran the job again).
                status = self.agent_status(rows[attempt])
                assert rows[attempt].reason.value in ("preempted", "lost"), (job.name, attempt, rows[attempt].reason)
                assert not (status and status.state == "exited"), f"{job.name}: attempt {attempt} reported its exit"
                stats["finished_unreported"] += 1
            self._check_resumes(job, rows, events, stats)
            stats["attempts"] += len(rows)
            stats.update(f"ended_{a.reason.value}" for a in rows.values() if a.reason is not None)
            stats["preemptions"] += job.preemptions
        assert not self.live_instances(), f"instances left running: {[d.name for d, _ in self.live_instances()]}"
        left = [p for d, _ in self.instances() for p in marked_pids(d)]
        assert not left, f"processes left running: {left}"
        return dict(stats)

    def agent_status(self, attempt: Attempt):  # type: ignore[no-untyped-def]
        """The attempt's agent status as its sim instance left it (the id names the installation)."""
        if not attempt.instance_id:
            return None
        return read_status(self.home / "sim" / "instances" / attempt.instance_id / "run")

    def _check_resumes(self, job: Job, rows: dict[int, Attempt], events,  # type: ignore[no-untyped-def]
                       stats: Counter[str]) -> None:
        manifests = self.manifests(job)
        for t_start, attempt, kind, rest in events:
            if kind != "start":
                continue
            status = self.agent_status(rows[attempt])
            restored_at = status.running_since if status and status.running_since else t_start
            earlier = [m for m in manifests if m.attempt < attempt]
            late = [m.name for m in earlier if m.created_at > restored_at]
            assert not late, f"{job.name}/{attempt}: {late} became durable after it restored (hand-off broken)"
            latest = max((m.step or 0 for m in earlier), default=0)
            assert int(rest[0]) == latest, f"{job.name}/{attempt} resumed at step {rest[0]}, latest was {latest}"
            stats["resumes"] += attempt > 1 and latest > 0

    def crash_points(self) -> Counter[str]:
        path = self.home / "crashes.log"
        return Counter(line.split()[-1] for line in path.read_text().splitlines()) if path.exists() else Counter()

    def cleanup(self) -> None:
        """Whatever happened: no daemon, no instance process, no cloud process left behind."""
        from gpuorch.provider.localdir.instances import InstanceDir
        from gpuorch.provider.port import InstanceState
        from gpuorch_sim.cloud import stop_cloud

        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()
        stop_cloud(self.home / "sim")
        for d, _ in self.instances():
            InstanceDir(d).end(InstanceState.TERMINATED, "test-cleanup")
        self.store.close()


def by_status(rows: dict[int, list[Attempt]]) -> Counter[str]:
    return Counter(a.status.value for atts in rows.values() for a in atts if a.status != AttemptStatus.ENDED)


def summary(night: Night) -> str:
    jobs_ = Counter(j.status.value for j in night.jobs())
    return f"jobs {dict(jobs_)} attempts {dict(by_status(night.attempts()))} kills {dict(night.kills)}"



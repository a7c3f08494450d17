"""The money night: a seeded night of chaos on the assembled daemon (``gpuorch.testing.daemon``:
the config file enabling the ``sim`` and ``local`` providers, built as ``gpuorch daemon`` builds
it), and a money check that does not trust the daemon's own arithmetic.

Every random choice comes from the seed, and every step waits on a condition (an attempt running
for ``HOLD_S``, an instance's end in the cloud's record), never on a race: each job runs until the
test opens its gate (``gated_job.py``), the traces never drop (preemptions are the test's), and a
preempted zone stays avoided all night. So one seed replays the same decisions
(``Night.decisions``), however loaded the machine.

The bill is computed from the providers' own instance records (``meta.json``: created_at,
ended_at, the offer sold with its price and billing rule), with the billing rule written out
here from docs/money.md, and compared with what the daemon recorded per attempt. The sim bills
per second with a 3 s minimum in this night (its ``billing_*`` options), every attempt runs
for seconds, and some instances end while the daemon is not looking (an outage of
``OUTAGE_S``): an attempt billed to the pass that saw its end instead of the cloud's end is off
by whole increments, and the check fails.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from sqlmodel import select

from gpuorch.money.cost import attempt_cost
from gpuorch.provider import Offer
from gpuorch.provider.localdir.instances import Meta
from gpuorch.store.models import Attempt, AttemptStatus, Job
from gpuorch.testing.contract import wait_until
from gpuorch.testing.daemon import AssembledDaemon
from tests.workloads.podman_image import build_image, local_container, python_env
from tests.workloads.podman_image import unavailable as boxed_image_unavailable

GATED_JOB = Path(__file__).with_name("gated_job.py")
VOLUME_JOB = Path(__file__).with_name("volume_job.py")  # the gated job, its checkpoints in its volume
ZONES = ("aa-1a", "aa-1b", "bb-1a")
SPOT, ON_DEMAND = 18.0, 36.0  # USD per hour: half a cent and a cent a second
GRANULARITY_S, MINIMUM_S = 1, 3  # the sim's billing rule tonight
HOLD_S = 2.0  # every attempt runs at least this long before the next blow: time must matter
OUTAGE_S = 2.5  # the daemon looks this long after an instance ended in the cloud
# Caps: a launch is admitted only if the cap covers its worst case (its runway, 3 decision
# intervals of 30 s, plus the horizon: ~155 s here); the sweep's cap admits two trials at a time.
JOB_CAP, SPENDER_CAP, SWEEP_CAP, DAILY_CAP = 2.0, 0.5, 2.0, 30.0
# The volume job may go on demand after its reclaim (~$1.55 a launch's worst case): its cap admits
# that whatever it spent on spot meanwhile, so no decision of its depends on how long the night took.
VOLUME_CAP = 6.0
TIMEOUT_S = 240.0  # per wait: only a stuck night reaches it


def config(traces: Path, gates: Path) -> dict[str, Any]:
    """The sim and local providers; local runs ``image:`` jobs in this host's podman, with the
    gates directory mounted at its own path (a boxed job's gate is where the test touches it)."""
    local: dict[str, Any] = {}
    if boxed_image_unavailable() is None:
        c = local_container()
        local["container"] = {"runtime": c.runtime, "run_args": [*c.run_args, "--volume", f"{gates}:{gates}"],
                              "gpus": c.gpus}
    sim = {"traces": str(traces), "time_scale": 1, "boot_s": 0.5, "spot_price": SPOT, "on_demand_price": ON_DEMAND,
           "billing_granularity_s": GRANULARITY_S, "min_billing_s": MINIMUM_S, "min_notice_wall_s": 0.5,
           "cloud_idle_exit_s": 600}
    return {"providers": {"sim": sim, "local": local}, "poll_s": 0.2, "max_sleep_s": 0.2, "lease_s": 1.0,
            "avoid_preempted_zone_s": 86400, "backoff_s": 1, "budget_stop_grace_s": 5, "daily_budget": DAILY_CAP,
            "recovery_strategy": "same-region-first"}


def billed(meta: Meta, sold: Offer, now: datetime) -> float:
    """What the provider charges for one instance record (docs/money.md, "The cost model"): per
    increment from its creation to its end, at least the minimum, at the price of its catalog's
    offer (``sold``; the record's own offer is the request's, for a gang the whole gang's price)."""
    seconds = ((meta.ended_at or now) - meta.created_at).total_seconds()
    g, minimum = sold.billing_granularity_s, sold.min_billing_s
    increments = max(math.ceil(minimum / g), math.ceil(seconds / g)) if seconds > 0 else 0
    price = sold.spot_price_per_hour if meta.spot else sold.price_per_hour
    return (price or 0.0) * increments * g / 3600.0


class Night:
    def __init__(self, home: Path, seed: int) -> None:
        self.home, self.seed, self.rng = home, seed, random.Random(seed)
        self.gates = home / "gates"
        self.gates.mkdir(parents=True, exist_ok=True)
        traces = home / "traces"
        traces.mkdir(exist_ok=True)
        for z in ZONES:  # spot always there: reclaims are the test's choice
            (traces / f"{z}_v100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 5000}))
        self.config = config(traces, self.gates)
        self.d = AssembledDaemon.start(home / "daemon", self.config)
        self.actions: list[str] = []  # what the test did, in order
        self.chaos: list[int] = []  # jobs the blows may hit
        self.spender = self.gang = self.sweep_id = 0
        self.boxed: list[int] = []  # the container job, where this host has podman
        self.volume_job = 0  # a job with a volume on the sim, reclaimed once (blow "volume")
        self.lives = 1

    # -- the daemon ------------------------------------------------------------------------
    def passes(self, check, what: str):  # type: ignore[no-untyped-def]
        return self.d.until(check, timeout_s=TIMEOUT_S, what=what)

    def restart(self, crash: bool) -> None:
        """A new daemon on the same home; a crash releases nothing (its leases run out first)."""
        old = self.d
        if crash:
            for p in old.rec.providers.values():
                p.close()
            old.store.close()
        else:
            old.close()
        self.d = AssembledDaemon.start(self.home / "daemon", self.config)
        self.lives += 1

    # -- jobs --------------------------------------------------------------------------------
    def spec(self, name: str, **over: Any) -> dict[str, Any]:
        return {"name": name, "run": f"{sys.executable} {GATED_JOB}", "resources": {"gpu": "V100"},
                "providers": ["sim"], "env": {"GATE": str(self.gates / name), "STEP_S": "0.1", "EVERY": "5"},
                "checkpoint": {"store": (self.home / "ckpt").as_uri(), "interval": "0.5s"},
                "retry": {"max_preemptions": 50}, "budget": {"max_cost": JOB_CAP}, **over}

    def submit_all(self, n: int) -> None:
        for i in range(n):
            policy = self.rng.choice(["spot", "spot", "on-demand"])
            self.chaos.append(self.d.submit(self.spec(f"job-{i}", spot_policy=policy)))
        # A job whose cap cannot cover a launch's worst case: never started.
        self.spender = self.d.submit(self.spec("spender", spot_policy="on-demand",
                                               budget={"max_cost": SPENDER_CAP}))
        # A two-node gang on the local provider (the sim sells single instances).
        gate = self.gates / "gang"
        self.gang = self.d.submit({"name": "gang", "nodes": 2, "resources": {"gpu": "A100:80GB:1"},
                                   "providers": ["local"], "spot_policy": "on-demand",
                                   "run": f'test -n "$NODE_RANK" && while [ ! -e {gate} ]; do sleep 0.1; done'})
        if (image := self.image()) is not None:
            # A container job on the local provider: the gated job inside podman (its Python
            # bind-mounted read-only: tests/workloads/podman_image.py), preempted and resumed there.
            work = self.home / "boxed-work"
            work.mkdir(exist_ok=True)
            (work / GATED_JOB.name).write_bytes(GATED_JOB.read_bytes())
            self.boxed.append(self.d.submit(self.spec(
                "boxed", run=f'"$PY" {GATED_JOB.name}', image=image, workdir=str(work), providers=["local"],
                resources={"gpu": "A100:80GB:1"}, spot_policy="spot",
                env={**python_env(), "GATE": str(self.gates / "boxed"), "STEP_S": "0.1", "EVERY": "5"})))
        # A volume job on the sim: its checkpoints live in its volume, which keeps it to one zone.
        self.volume_job = self.d.submit(self.spec("volume", run=f"{sys.executable} {VOLUME_JOB}", spot_policy="auto",
                                                  volume={"size": "1GB", "mount": "/data"},
                                                  budget={"max_cost": VOLUME_CAP}))
        sweep = self.home / "sweep.yaml"
        # keep_warm 0: the bill is checked per instance against the attempt its tags name, and a warm
        # instance (a trial's default, docs/money.md "Warm capacity") also bills idle time and later trials.
        trial = self.spec("trial", spot_policy="spot", keep_warm=0)
        trial["env"]["GATE"] = str(self.gates / "sweep")
        sweep.write_text(yaml.safe_dump({"name": "night-sweep", "job": trial, "parameters": {"LR": [1, 2, 3]},
                                         "search": {"method": "grid"}, "max_parallel": 2,
                                         "budget": {"max_cost": SWEEP_CAP}}))
        self.sweep_id = int(self.d.submit_sweep(sweep)["id"])
        self.actions.append(f"submitted {n} jobs, a spender, a gang, {len(self.boxed)} boxed, a volume job, "
                            "a sweep of 3")

    def image(self) -> str | None:
        """The busybox image the container job runs in, or None where this host has no podman."""
        if boxed_image_unavailable() is not None:
            return None
        (tmp := self.home / "image").mkdir(exist_ok=True)
        return build_image(tmp)

    def jobs(self) -> list[Job]:
        with self.d.store.read() as s:
            return list(s.exec(select(Job).order_by(Job.id)))  # type: ignore[arg-type]

    def trials(self) -> list[int]:
        return [j.id for j in self.jobs() if j.sweep_id == self.sweep_id]  # type: ignore[misc]

    def live(self, job_id: int) -> Attempt | None:
        return next((a for a in self.d.attempts(job_id) if a.status.live), None)

    def held(self, job_id: int) -> bool:
        """Not ended, and its attempt has run for ``HOLD_S`` (or it waits for a sweep slot)."""
        if self.d.job(job_id).status.terminal:
            return True
        a = self.live(job_id)
        if a is None:
            return job_id in self.trials() and not self.d.attempts(job_id)
        return a.status == AttemptStatus.RUNNING and a.started_at is not None and \
            (datetime.now(UTC) - a.started_at.replace(tzinfo=UTC)).total_seconds() >= HOLD_S

    def settle(self) -> None:
        targets = [*self.chaos, self.gang, *self.boxed, self.volume_job, *self.trials()]
        self.passes(lambda: all(self.held(j) for j in targets), "every job's attempt to run a while")

    def targets(self, sim_only: bool) -> list[int]:
        """Jobs running now that a blow may hit (the gang and the container job too, unless the blow
        needs the sim's cloud process to carry a reclaim out while the daemon looks away)."""
        jobs = [*self.chaos, *self.trials(), *([] if sim_only else [self.gang, *self.boxed])]
        return [j for j in jobs if not self.d.job(j).status.terminal
                and (a := self.live(j)) is not None and a.status == AttemptStatus.RUNNING]

    # -- the blows ---------------------------------------------------------------------------
    def blows(self) -> list[str]:
        """Tonight's blows in a seeded order: every kind at least once ("volume": the volume job's
        reclaim, with a notice or in an outage; no other blow hits that job)."""
        kinds = ["notice", "notice", "notice", "outage", "outage", "cancel", "finish", "restart", "crash", "capacity",
                 "volume"]
        self.rng.shuffle(kinds)
        return kinds

    def blow(self, kind: str) -> None:
        self.settle()
        targets = self.targets(sim_only=kind == "outage")
        if kind in ("notice", "outage", "cancel", "finish") and not targets:
            kind = "restart"
        job = self.rng.choice(targets) if kind in ("notice", "outage", "cancel", "finish") else 0
        name = self.d.job(job).name if job else ""
        self.actions.append(f"{kind} {name}".strip())
        if kind == "volume":
            how = self.rng.choice(["notice", "outage"])
            self.actions[-1] = f"volume {how}"
            self.preempt(self.volume_job, notice_s=1.0 if how == "notice" else 0.0, outage=how == "outage")
        elif kind == "notice":
            self.preempt(job, notice_s=self.rng.choice([1.0, 2.0]))
        elif kind == "outage":
            self.preempt(job, notice_s=0.0, outage=True)
        elif kind == "cancel":
            self.d.service.cancel(str(job))
            self.passes(lambda: self.d.job(job).status.terminal, f"{name} to be cancelled")
        elif kind == "finish":
            (self.gates / ("sweep" if job in self.trials() else name)).touch()
            self.passes(lambda: self.d.job(job).status.terminal, f"{name} to finish")
        elif kind in ("restart", "crash"):
            self.restart(crash=kind == "crash")
        else:
            zone = self.rng.choice(ZONES)
            self.actions[-1] = f"capacity {zone}"
            self.d.adapter("sim").set_capacity(zone, "p3.2xlarge", True, False)

    def preempt(self, job: int, notice_s: float, outage: bool = False) -> None:
        """Reclaim the job's instance ``notice_s`` from now; in an outage, the daemon looks only
        ``OUTAGE_S`` after the cloud's end (the sim's cloud process carries the reclaim out)."""
        a = self.live(job)
        assert a is not None and a.instance_id
        self.d.adapter(a.provider).inject_preemption(a.instance_id, notice_s)
        if outage:
            record = self.home / "daemon" / a.provider / "instances" / a.instance_id / "meta.json"

            def ended_long_ago() -> bool:
                meta = Meta.model_validate_json(record.read_text())
                return meta.ended_at is not None and \
                    (datetime.now(UTC) - meta.ended_at).total_seconds() >= OUTAGE_S

            wait_until(ended_long_ago, timeout_s=TIMEOUT_S, step_s=0.1, what="the cloud to reclaim it")
        self.passes(lambda: any(r.number == a.number and r.status == AttemptStatus.ENDED
                                for r in self.d.attempts(job)), "the reclaimed attempt's end")

    def morning(self) -> None:
        """Open every gate; every job ends, and no instance is left."""
        for j in self.jobs():
            (self.gates / ("sweep" if j.sweep_id else j.name)).touch()
        self.passes(lambda: all(j.status.terminal for j in self.jobs()), "every job to end")
        self.passes(lambda: not [m for m in self.records() if m.ended_at is None], "every instance to end")
        sim = self.d.adapter("sim")
        self.passes(lambda: not sim.list_volumes(), "the ended volume job's volume to be deleted")
        assert not [p for p in sim.sim_volumes.root.iterdir() if p.name != ".lock"], "a volume's files were left"
        self.actions.append(f"morning; the volume job saw the marks of attempts {self.volume_marks()}")

    def volume_marks(self) -> list[int]:
        """The attempts whose marks the volume job's last attempt found in its volume: every attempt
        that ran it, all in the volume's zone (the volume followed the job through its reclaim)."""
        job = self.d.job(self.volume_job)
        result = json.loads(job.result or "{}")
        ran = [a for a in self.d.attempts(self.volume_job) if a.started_at is not None]
        assert job.status.value == "succeeded" and job.volume_id, (job.status, job.message)
        assert result["marks"] == [a.number for a in ran] and len(ran) >= 2, (result, ran)
        assert {a.zone for a in ran} == {job.volume_zone}, ran
        assert Path(result["volume_dir"]) == self.d.adapter("sim").sim_volumes.data_dir(job.volume_id)
        return list(result["marks"])

    # -- ground truth ------------------------------------------------------------------------
    def records(self) -> list[Meta]:
        out = []
        for provider in ("sim", "local"):
            for f in sorted((self.home / "daemon" / provider / "instances").glob("*/meta.json")):
                out.append(Meta.model_validate_json(f.read_text()))
        return out

    def decisions(self) -> list[Any]:
        """What the daemon decided, without times: per job its attempts (where, spot, how each
        ended) and its end; and what the test did."""
        out: list[Any] = list(self.actions)
        for j in self.jobs():
            rows = [(a.number, a.provider, a.zone, a.spot, a.reason.value if a.reason else None)
                    for a in self.d.attempts(j.id)]  # type: ignore[arg-type]
            out.append((j.name, j.status.value, rows))
        return out

    def check_money(self) -> dict[str, Any]:
        """Per attempt: the daemon's cost equals the providers' bill for its instances. Per job,
        per sweep and per UTC day: the providers' bill stays under the cap."""
        now = datetime.now(UTC)
        bill: dict[tuple[str, str], float] = defaultdict(float)
        nodes: Counter[tuple[str, str]] = Counter()
        per_day: Counter[str] = Counter()
        catalog = {(o.provider, o.zone, o.instance_type): o for name in ("sim", "local")
                   for o in self.d.adapter(name).offers()}
        for m in self.records():
            key = (m.tags["gpuorch:job"], m.tags["gpuorch:attempt"])
            cost = billed(m, catalog[(m.offer.provider, m.offer.zone, m.offer.instance_type)], now)
            bill[key] += cost
            nodes[key] += 1
            per_day[m.created_at.date().isoformat()] += cost  # tonight's intervals are seconds long
        jobs = {j.id: j for j in self.jobs()}
        rows = {(str(j), str(a.number)): a for j in jobs for a in self.d.attempts(j)}  # type: ignore[arg-type]
        assert set(bill) <= set(rows), f"instances billed for attempts no row records: {set(bill) - set(rows)}"
        wrong = {}
        for key, a in rows.items():
            # A gang's nodes are created and ended one after another (microseconds apart): an
            # increment per extra node; a single instance matches exactly, and an attempt that never
            # got an instance (no capacity, a launch refused) costs nothing on either side.
            slack = max(0, nodes[key] - 1) * (a.price_per_hour / max(1, nodes[key])) * GRANULARITY_S / 3600 + 1e-9
            recorded = attempt_cost(a, now)
            if abs(recorded - bill[key]) > slack:
                wrong[key] = (recorded, bill[key], nodes[key], a.launched_at, a.ended_at, a.price_per_hour)
        assert not wrong, f"attempts whose cost differs from the providers' bill (job, attempt): {wrong}"
        per_job: Counter[int] = Counter()
        for (j, _), cost in bill.items():
            per_job[int(j)] += cost
        for j, cost in per_job.items():
            cap = {self.spender: SPENDER_CAP, self.gang: math.inf, self.volume_job: VOLUME_CAP}.get(j, JOB_CAP)
            assert cost <= cap + 1e-9, f"job {jobs[j].name} billed {cost:.4f} over its cap {cap}"
        swept = sum(per_job[j] for j in self.trials())
        assert swept <= SWEEP_CAP + 1e-9, f"the sweep billed {swept:.4f} over its cap {SWEEP_CAP}"
        assert all(c <= DAILY_CAP + 1e-9 for c in per_day.values()), f"a day over {DAILY_CAP}: {per_day}"
        long = sum(1 for m in self.records() if m.ended_at and (m.ended_at - m.created_at) > timedelta(
            seconds=MINIMUM_S + 1))
        return {"billed": round(sum(bill.values()), 4), "attempts": len(rows), "over_minimum": long,
                "spender": round(per_job[self.spender], 4), "sweep": round(swept, 4)}

    def close(self) -> None:
        sim = self.d.adapter("sim")
        for p in self.d.rec.providers.values():
            for inst in p.list_managed():
                if inst.state.alive:
                    p.terminate(inst.id)
        sim.stop_cloud()
        self.d.close()

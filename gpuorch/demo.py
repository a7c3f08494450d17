"""`make demo`: gpuorch end to end on this machine, no cloud account.

Starts the daemon on the local provider (a simulated multi-region spot market whose instances
are process groups here), submits three small NumPy training jobs through the CLI, takes the
cheapest A100 spot zone out of capacity for one of them, preempts another with a notice, and
prints a table: where each attempt ran, the checkpoint it resumed from, the work lost, the
result next to an uninterrupted reference run, and the simulated cost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from gpuorch.provider.port import Offer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "configs" / "examples" / "tiny_mlp"
HOME = Path(os.environ.get("GPUORCH_DEMO_HOME", ROOT / "demo-home")).resolve()
NOTICE_S = 20.0
TIMEOUT_S = 150.0

JOBS = {
    # name: (env, gpu)
    "mlp-preempted": ({"STEPS": "500", "CKPT_EVERY": "50", "STEP_SLEEP": "0.04", "SEED": "1"}, "A100:80GB:1"),
    "mlp-steady": ({"STEPS": "350", "CKPT_EVERY": "50", "STEP_SLEEP": "0.04", "SEED": "2"}, "24GB+"),
    "mlp-fallback": ({"STEPS": "350", "CKPT_EVERY": "50", "STEP_SLEEP": "0.04", "SEED": "3"}, "H100:1"),
}

console = Console(width=None if sys.stdout.isatty() else 140)


def demo_env() -> dict[str, str]:
    """Only the demo's own config applies: not /etc/gpuorch's, not the user's, not GPUORCH_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUORCH_")}
    return {**env, "GPUORCH_HOME": str(HOME), "CONFIGURATION_DIRECTORY": str(HOME / "no-system-config"),
            "XDG_CONFIG_HOME": str(HOME / "no-user-config")}


def gpuorch(*args: str, check: bool = True) -> str:
    env = demo_env()
    out = subprocess.run([sys.executable, "-m", "gpuorch", *args], env=env, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise SystemExit(f"gpuorch {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def start_reference(name: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    """The same training run, uninterrupted and without gpuorch, in the background."""
    d = Path(tempfile.mkdtemp(prefix=f"gpuorch-ref-{name}-"))
    run_env = {**os.environ, **env, "STEP_SLEEP": "0", "GPUORCH_CHECKPOINT_DIR": str(d / "ckpt"),
               "GPUORCH_RESULT_FILE": str(d / "result.json")}
    proc = subprocess.Popen([sys.executable, str(EXAMPLE / "train.py")], env=run_env, cwd=d, stdout=subprocess.DEVNULL)
    return proc, d / "result.json"


def reference_losses(refs: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> dict[str, float]:
    out = {}
    for name, (proc, result) in refs.items():
        if proc.wait() != 0:
            raise SystemExit(f"the reference run of {name} failed")
        out[name] = float(json.loads(result.read_text())["final_loss"])
        shutil.rmtree(result.parent, ignore_errors=True)
    return out


def write_spec(name: str, env: dict[str, str], gpu: str) -> Path:
    spec = {
        "name": name, "run": "python3 train.py", "workdir": str(EXAMPLE), "env": env,
        "resources": {"gpu": gpu}, "spot_policy": "spot",
        "checkpoint": {"store": f"file://{HOME / 'checkpoints'}", "interval": "2s"},
    }
    path = HOME / "jobs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


class _LocalMarket(Protocol):
    """What the demo asks of the local provider: its market, its capacity knob, reclaims."""

    def offers(self) -> list[Offer]: ...
    def set_capacity(self, zone: str, instance_type: str, spot: bool, available: bool) -> None: ...
    def inject_preemption(self, instance_id: str, notice_s: float) -> None: ...


def main() -> int:
    from gpuorch.registry import load_provider

    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    (HOME / "config.yaml").write_text("providers: {local: {}}\npoll_s: 0.5\nmax_sleep_s: 0.5\n")
    # Through the registry, as the daemon finds it: state in HOME/local, the daemon's own.
    local = cast(_LocalMarket, load_provider("local", {}, HOME))
    console.rule("[bold]gpuorch demo[/]: local provider, simulated spot market, state in " + str(HOME))

    refs = {name: start_reference(name, env) for name, (env, _) in JOBS.items()}

    # The cheapest H100 spot zone has no capacity: the fallback job must try the next offer.
    h100 = sorted((o for o in local.offers() if o.gpu == "H100" and o.spot_price_per_hour),
                  key=lambda o: o.spot_price_per_hour or 0.0)[0]  # all have a spot price
    local.set_capacity(h100.zone, h100.instance_type, spot=True, available=False)
    console.print(f"Market: [yellow]{h100.zone} {h100.instance_type} spot has no capacity[/]")

    daemon_log = (HOME / "daemon.log").open("w")
    daemon = subprocess.Popen([sys.executable, "-m", "gpuorch", "daemon"], env=demo_env(),
                              stdout=daemon_log, stderr=subprocess.STDOUT)
    try:
        ids = {}
        for name, (env, gpu) in JOBS.items():
            ids[name] = json.loads(gpuorch("submit", str(write_spec(name, env, gpu)), "--json"))["id"]
            console.print(f"submitted job {ids[name]} [cyan]{name}[/] needing {gpu}")
        ok = follow(local, ids)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    report(ids, reference_losses(refs))
    console.print(f"\nEverything is in {HOME}: `GPUORCH_HOME={HOME} .venv/bin/gpuorch events` shows the whole story.")
    return 0 if ok else 1


def follow(local: _LocalMarket, ids: dict[str, int]) -> bool:
    """Print events as they happen; preempt the first job once it has made some progress."""
    from sqlmodel import col, select

    from gpuorch.jobs import intent as jobs
    from gpuorch.store import Event, Job, Store

    store = Store(f"sqlite:///{HOME / 'state.db'}")
    last_event, preempted, start = 0, False, time.monotonic()
    while time.monotonic() - start < TIMEOUT_S:
        with store.read() as s:
            for e in s.exec(select(Event).where(col(Event.id) > last_event).order_by(col(Event.id))):
                where = f"job {e.job_id}/{e.attempt}" if e.attempt else f"job {e.job_id}"
                console.print(f"  [dim]{e.ts:%H:%M:%S}[/] {where:<10} [bold]{e.kind:<17}[/] {e.message}")
                last_event = e.id or last_event
            attempts = jobs.attempts_of(s, ids["mlp-preempted"])
            current = attempts[-1] if attempts else None
            states = [j.status for j in s.exec(select(Job))]
        # Preempt once the job has a durable checkpoint: the notice's final checkpoint is what it resumes from.
        live = current if current is not None and current.ended_at is None else None
        if not preempted and live is not None and live.instance_id and live.last_checkpoint is not None:
            console.print(f"[red]>>> the cloud announces: {live.instance_id} will be reclaimed in {NOTICE_S:.0f}s[/]")
            local.inject_preemption(live.instance_id, NOTICE_S)
            preempted = True
        if all(st.terminal for st in states):
            return all(st.value == "succeeded" for st in states)
        time.sleep(0.5)
    console.print("[red]timed out[/]")
    return False


def report(ids: dict[str, int], refs: dict[str, float]) -> None:
    attempts = Table(title="Attempts: where each ran and what it resumed from")
    for col in ("job", "#", "zone", "instance type", "market", "outcome", "resumed from", "lost work", "cost"):
        attempts.add_column(col)
    results = Table(title="Results against an uninterrupted run of the same job")
    for col in ("job", "status", "attempts", "preemptions", "final loss", "uninterrupted", "same?", "cost"):
        results.add_column(col)
    for name, job_id in ids.items():
        d = json.loads(gpuorch("status", str(job_id), "--json"))
        for a in d["attempt_list"]:
            lost = f"{a['lost_work_s']:.1f}s" if a["lost_work_s"] is not None else "-"
            resumed = a["resumed_from"] or ("fresh" if a["instance_id"] else "-")
            market = "spot" if a["spot"] else "on-demand"
            attempts.add_row(name, str(a["number"]), a["zone"], a["instance_type"], market,
                             a["reason"] or a["status"], resumed, lost, f"${a['cost']:.4f}")
        loss = (d["result"] or {}).get("final_loss")
        same = "[green]yes[/]" if loss == refs[name] else "[red]NO[/]"
        results.add_row(name, d["status"], str(d["attempts"]), str(d["preemptions"]), str(loss), str(refs[name]), same,
                        f"${d['cost']:.4f}")
    console.print(attempts)
    console.print(results)


if __name__ == "__main__":
    raise SystemExit(main())

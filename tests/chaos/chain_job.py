"""A deterministic job for the chaos test (stdlib only): a SHA-256 chain, checkpointed, resumable.

    state_0 = sha256(SEED);  state_i = sha256(state_{i-1} || i)  for i = 1..STEPS

The result is ``{"digest": state_STEPS, "steps": STEPS}``; any resume from a wrong or torn
checkpoint changes the digest. Env: SEED, STEPS, STEP_S (seconds per step), EVERY (checkpoint
every N steps), LEDGER (a file shared by every attempt: ``start``/``done`` lines appended).
Each checkpoint is ``step-N/state.json`` with COMPLETE written last. On SIGUSR1 (a notice) it
checkpoints at the next step boundary and then stops working: what it would do after that is
lost with the instance anyway, and a job that finished during its drain would finish twice.
"""

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

notice = []
signal.signal(signal.SIGUSR1, lambda *_: notice.append(time.time()))

root = Path(os.environ["GPUORCH_CHECKPOINT_DIR"])
seed, steps = os.environ["SEED"], int(os.environ["STEPS"])
step_s, every = float(os.environ.get("STEP_S", "0.05")), int(os.environ.get("EVERY", "25"))
attempt = os.environ.get("GPUORCH_ATTEMPT", "?")


def ledger(line: str) -> None:
    fd = os.open(os.environ["LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{time.time():.3f} {attempt} {line}\n".encode())
    finally:
        os.close(fd)


def checkpoint(step: int, state: bytes) -> None:
    d = root / f"step-{step}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"step": step, "state": state.hex()}))
    (d / ".COMPLETE").write_text(json.dumps({"step": step}))
    os.rename(d / ".COMPLETE", d / "COMPLETE")  # last, and whole
    for old in sorted(root.glob("step-*"), key=lambda p: int(p.name[5:]))[:-2]:  # keep two locally
        for f in old.iterdir():
            f.unlink()
        old.rmdir()


def restore() -> tuple[int, bytes, str]:
    done = [d for d in root.glob("step-*") if (d / "COMPLETE").exists()]
    if not done:
        return 0, hashlib.sha256(seed.encode()).digest(), "-"
    d = max(done, key=lambda p: int(p.name[5:]))
    data = json.loads((d / "state.json").read_text())
    return int(data["step"]), bytes.fromhex(data["state"]), d.name


step, state, name = restore()
ledger(f"start {step} {name}")
while step < steps:
    time.sleep(step_s)
    step += 1
    state = hashlib.sha256(state + str(step).encode()).digest()
    if notice:
        checkpoint(step, state)
        ledger(f"notice {step}")
        while True:  # the instance is going away: wait for it
            time.sleep(1)
    if step % every == 0:
        checkpoint(step, state)
Path(os.environ["GPUORCH_RESULT_FILE"]).write_text(json.dumps({"digest": state.hex(), "steps": steps}))
ledger(f"done {state.hex()}")
sys.exit(0)

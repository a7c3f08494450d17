"""A scripted job for the agent tests (stdlib only), following the checkpoint protocol.

Env: STEPS (total steps, 1000), EVERY (checkpoint every N steps; 0: only on the signal),
STEP_S (seconds per step, 0.02), EXIT_ON_NOTICE ("1": exit 0 right after the notice checkpoint),
EXIT_CODE (at the end, 0). Writes env.json (its GPUORCH_* variables) into its cwd at start.
Each checkpoint step-N holds state.txt (the step) and frozen.bin (1 MiB, the same every time).
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

root = Path(os.environ["GPUORCH_CHECKPOINT_DIR"])
steps = int(os.environ.get("STEPS", "1000"))
every = int(os.environ.get("EVERY", "0"))
step_s = float(os.environ.get("STEP_S", "0.02"))
notice = []
signal.signal(signal.SIGUSR1, lambda *_: notice.append(time.time()))
Path("env.json").write_text(json.dumps({k: v for k, v in os.environ.items() if k.startswith("GPUORCH_")}))


def complete():
    done = [(int((d / "state.txt").read_text()), d) for d in root.glob("step-*") if (d / "COMPLETE").exists()]
    return sorted(done)


def checkpoint(step):
    d = root / f"step-{step}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.txt").write_text(str(step))
    (d / "frozen.bin").write_bytes(b"\x07" * (1 << 20))
    (d / "COMPLETE").write_text(json.dumps({"step": step}))  # last
    print(f"checkpoint {d.name}", flush=True)


step = complete()[-1][0] if complete() else 0
print(f"start at step {step}", flush=True)
while step < steps:
    time.sleep(step_s)
    step += 1
    if notice or (every and step % every == 0):
        checkpoint(step)
    if notice:
        notice.clear()
        Path("got-notice").write_text(str(step))
        if os.environ.get("EXIT_ON_NOTICE") == "1":
            sys.exit(0)
print(f"done at step {step}", flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))

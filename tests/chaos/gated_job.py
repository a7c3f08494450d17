"""A job that runs until the test says it may finish (stdlib only), for the money night.

It counts steps every STEP_S seconds, checkpoints every EVERY steps (``step-N/state.json``, COMPLETE
last) and resumes from the newest complete one. It exits 0 once the file GATE exists, with the
result ``{"steps": N}``; so how long each attempt runs, and whether a job finishes before a
preemption, is the test's choice, never a race. On SIGUSR1 (a notice) it checkpoints at once and
waits for the instance to go. Env: GATE, STEP_S, EVERY.
"""

import json
import os
import signal
import time
from pathlib import Path

notice = []
signal.signal(signal.SIGUSR1, lambda *_: notice.append(time.time()))

root = Path(os.environ["GPUORCH_CHECKPOINT_DIR"])
gate = Path(os.environ["GATE"])
step_s, every = float(os.environ.get("STEP_S", "0.1")), int(os.environ.get("EVERY", "5"))


def checkpoint(step: int) -> None:
    d = root / f"step-{step}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"step": step}))
    (d / ".COMPLETE").write_text(json.dumps({"step": step}))
    os.rename(d / ".COMPLETE", d / "COMPLETE")
    for old in sorted(root.glob("step-*"), key=lambda p: int(p.name[5:]))[:-2]:
        for f in old.iterdir():
            f.unlink()
        old.rmdir()


done = [d for d in root.glob("step-*") if (d / "COMPLETE").exists()]
step = max((int(d.name[5:]) for d in done), default=0)
while not gate.exists():
    time.sleep(step_s)
    step += 1
    if notice:
        checkpoint(step)
        while True:  # the instance is going away: wait for it
            time.sleep(1)
    if step % every == 0:
        checkpoint(step)
Path(os.environ["GPUORCH_RESULT_FILE"]).write_text(json.dumps({"steps": step}))

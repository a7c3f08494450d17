"""A tiny, real NumPy training job that follows gpuorch's checkpoint protocol.

A two-layer MLP learns a fixed synthetic classification task with Adam. Resuming from a
checkpoint is exact: weights, optimizer state, step and the RNG state are all saved, and every
random draw comes from that RNG, so an interrupted-and-resumed run ends with bitwise the same
final loss as an uninterrupted one.

Environment (all optional):
  STEPS        total optimizer steps (3000: about a minute on 2 cores)
  CKPT_EVERY   checkpoint every N steps (200)
  STEP_SLEEP   extra seconds per step, to slow demos down (0)
  SEED         initial weights and batch order (0)
  LR           Adam's learning rate (0.001)
  LOG_EVERY    metrics line every N steps (50)
  GPUORCH_CHECKPOINT_DIR, GPUORCH_METRICS_FILE, GPUORCH_RESULT_FILE: set by the gpuorch agent;
  without it checkpoints go to ./checkpoints and the result is only printed.

On SIGUSR1 (a preemption notice) it checkpoints at the next step boundary and keeps training.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

# A preemption notice can come at any time, even while numpy loads: install the handler first.
# It only sets a flag; the training loop checkpoints at the next step boundary.
checkpoint_requested = False


def _on_notice(signum: int, frame: object) -> None:
    global checkpoint_requested
    checkpoint_requested = True


signal.signal(signal.SIGUSR1, _on_notice)

# One BLAS thread: bitwise-reproducible sums whatever machine the resumed attempt lands on
# (a different thread count splits the sums differently), and faster for matrices this small.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402 - after the handler and the thread settings above

N_SAMPLES, N_IN, N_HIDDEN, N_CLASSES, BATCH = 4096, 128, 768, 10, 512
LR = float(os.environ.get("LR", "1e-3"))  # Adam's learning rate (a sweep parameter)
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
KEEP_LOCAL = 2
PARAMS = ("w1", "b1", "w2", "b2")


def make_data() -> tuple[np.ndarray, np.ndarray]:
    """A fixed dataset (its own seed, never checkpointed): labels from a random teacher net."""
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((N_SAMPLES, N_IN))
    teacher = np.tanh(x @ rng.standard_normal((N_IN, 32))) @ rng.standard_normal((32, N_CLASSES))
    return x, np.argmax(teacher + 0.5 * rng.standard_normal(teacher.shape), axis=1)


def init_state(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    params = {
        "w1": rng.standard_normal((N_IN, N_HIDDEN)) * np.sqrt(2.0 / N_IN),
        "b1": np.zeros(N_HIDDEN),
        "w2": rng.standard_normal((N_HIDDEN, N_CLASSES)) * np.sqrt(1.0 / N_HIDDEN),
        "b2": np.zeros(N_CLASSES),
    }
    zeros = {k: np.zeros_like(v) for k, v in params.items()}
    return {"step": 0, "params": params, "m": zeros, "v": {k: z.copy() for k, z in zeros.items()}, "rng": rng}


def loss_and_grads(params: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    pre = x @ params["w1"] + params["b1"]
    h = np.maximum(pre, 0.0)
    logits = h @ params["w2"] + params["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-np.mean(np.log(p[np.arange(len(y)), y] + 1e-12)))
    d_logits = p
    d_logits[np.arange(len(y)), y] -= 1.0
    d_logits /= len(y)
    d_h = (d_logits @ params["w2"].T) * (pre > 0)
    grads = {"w2": h.T @ d_logits, "b2": d_logits.sum(0), "w1": x.T @ d_h, "b1": d_h.sum(0)}
    return loss, grads


def adam_step(state: dict, grads: dict) -> None:
    t = state["step"] + 1
    for k in PARAMS:
        state["m"][k] = BETA1 * state["m"][k] + (1 - BETA1) * grads[k]
        state["v"][k] = BETA2 * state["v"][k] + (1 - BETA2) * grads[k] ** 2
        m_hat = state["m"][k] / (1 - BETA1**t)
        v_hat = state["v"][k] / (1 - BETA2**t)
        state["params"][k] -= LR * m_hat / (np.sqrt(v_hat) + EPS)
    state["step"] = t


# -- checkpoints: one directory per checkpoint, COMPLETE written last ---------------------------


def _write_durably(path: Path, write) -> None:
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(root: Path, state: dict) -> Path:
    step = state["step"]
    ckpt = root / f"step-{step}"
    if ckpt.exists():  # a torn write from before a crash
        shutil.rmtree(ckpt)
    ckpt.mkdir(parents=True)
    _write_durably(ckpt / "weights.npz", lambda f: np.savez(f, **state["params"]))
    moments = {**{f"m_{k}": v for k, v in state["m"].items()}, **{f"v_{k}": v for k, v in state["v"].items()}}
    _write_durably(ckpt / "optimizer.npz", lambda f: np.savez(f, **moments))
    rng_state = json.dumps({"step": step, "rng": state["rng"].bit_generator.state}).encode()
    _write_durably(ckpt / "state.json", lambda f: f.write(rng_state))
    _write_durably(ckpt / "COMPLETE", lambda f: f.write(json.dumps({"step": step}).encode()))
    for old in complete_checkpoints(root)[:-KEEP_LOCAL]:
        shutil.rmtree(old, ignore_errors=True)
    return ckpt


def complete_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoint dirs, oldest first (by the step in COMPLETE)."""
    found = []
    for d in root.glob("step-*"):
        try:
            found.append((json.loads((d / "COMPLETE").read_text())["step"], d))
        except (OSError, ValueError, KeyError):
            continue  # incomplete: being written, or torn by a crash
    return [d for _, d in sorted(found)]


def load_checkpoint(ckpt: Path) -> dict:
    state = init_state()
    with np.load(ckpt / "weights.npz") as w:
        state["params"] = {k: w[k] for k in PARAMS}
    with np.load(ckpt / "optimizer.npz") as o:
        state["m"] = {k: o[f"m_{k}"] for k in PARAMS}
        state["v"] = {k: o[f"v_{k}"] for k in PARAMS}
    saved = json.loads((ckpt / "state.json").read_text())
    state["step"] = saved["step"]
    state["rng"].bit_generator.state = saved["rng"]
    return state


def main() -> None:
    steps = int(os.environ.get("STEPS", "3000"))
    ckpt_every = int(os.environ.get("CKPT_EVERY", "200"))
    step_sleep = float(os.environ.get("STEP_SLEEP", "0"))
    log_every = int(os.environ.get("LOG_EVERY", "50"))
    root = Path(os.environ.get("GPUORCH_CHECKPOINT_DIR", "checkpoints"))
    metrics_file = os.environ.get("GPUORCH_METRICS_FILE")
    result_file = os.environ.get("GPUORCH_RESULT_FILE")

    global checkpoint_requested

    x, y = make_data()
    existing = complete_checkpoints(root)
    state = load_checkpoint(existing[-1]) if existing else init_state(int(os.environ.get("SEED", "0")))
    origin = f"resuming from {existing[-1].name}" if existing else "starting fresh"
    print(f"{origin} at step {state['step']}", flush=True)

    while state["step"] < steps:
        idx = state["rng"].integers(0, N_SAMPLES, BATCH)
        loss, grads = loss_and_grads(state["params"], x[idx], y[idx])
        adam_step(state, grads)
        step = state["step"]
        if metrics_file and (step % log_every == 0 or step == steps):
            with open(metrics_file, "a") as metrics:
                metrics.write(json.dumps({"step": step, "loss": loss}) + "\n")
        if checkpoint_requested or step % ckpt_every == 0:
            print(f"checkpoint at step {step}{' (notice)' if checkpoint_requested else ''}", flush=True)
            checkpoint_requested = False
            save_checkpoint(root, state)
        if step_sleep:
            time.sleep(step_sleep)

    final_loss, _ = loss_and_grads(state["params"], x, y)
    result = {"final_loss": final_loss, "steps": state["step"]}
    if result_file:
        Path(result_file).write_text(json.dumps(result))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

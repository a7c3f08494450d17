"""``TorchCheckpointer``: exact, preemption-safe checkpoints for a plain PyTorch training loop.

    from gpuorch.integrations.pytorch import TorchCheckpointer

    ckpt = TorchCheckpointer(model, optimizer, scheduler, every=200)
    start = ckpt.restore()                      # None: fresh; else {"step": ..., "extra": {...}}
    step = start["step"] if start else 0
    for batch in batches_from(start["extra"] if start else None):
        ...train one step...
        step += 1
        ckpt.step_end(step, extra={"epoch": epoch, "batch": i})   # every 200 steps, or at once on a notice

A checkpoint is ``$GPUORCH_CHECKPOINT_DIR/step-N/``: ``state.pt`` (model, optimizer, scheduler,
step, your ``extra``: the data position) and ``rng.pt`` (every rank's CPU, CUDA, ``random`` and
NumPy generator states), then ``COMPLETE``. Under ``torch.distributed`` the ranks agree on when
to save (a notice seen by any rank counts for all), rank 0 gathers the RNG states and writes
every file, and writes ``COMPLETE`` only after all ranks have handed theirs over, so the
checkpoint on rank 0's node is the whole job's (gpuorch uploads rank 0's). The model is saved
unwrapped (``model.module`` of a DistributedDataParallel); sharded training (FSDP) needs
``torch.distributed.checkpoint`` instead.

Imports torch when this module is imported; ``gpuorch.integrations`` itself does not.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import torch

from gpuorch.integrations.protocol import NoticeFlag, checkpoint_dir, latest_checkpoint, mark_complete, prune, rank

STATE_FILE = "state.pt"
RNG_FILE = "rng.pt"
PREFIX = "step-"


def _distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rng_state() -> dict[str, Any]:
    """This process's generator states: torch CPU and CUDA, ``random``, NumPy's global one."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")  # only if the job uses it: never imported here
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    numpy = sys.modules.get("numpy")
    if "numpy" in state and numpy is not None:
        numpy.random.set_state(state["numpy"])


class TorchCheckpointer:
    """Save and restore one training run's whole state; see the module docstring.

    ``every``: save every N steps (0: only on a notice and when asked). ``keep``: complete
    checkpoints kept on local disk. ``root``: default ``$GPUORCH_CHECKPOINT_DIR``.
    ``install_handler``: listen for the notice signal (``$GPUORCH_CHECKPOINT_SIGNAL``).
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
                 scheduler: Any = None, *, every: int = 0, keep: int = 2, root: Path | str | None = None,
                 install_handler: bool = True) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.every, self.keep = every, keep
        self.root = Path(root) if root is not None else checkpoint_dir()
        self.notice = NoticeFlag()
        if install_handler:
            self.notice.install()
        self.saved: list[Path] = []  # this process's checkpoints, oldest first

    @property
    def _module(self) -> torch.nn.Module:
        return getattr(self.model, "module", self.model)  # DistributedDataParallel wraps the model

    # -- restore --------------------------------------------------------------------------------

    def restore(self) -> dict[str, Any] | None:
        """Load the newest complete checkpoint into the model, optimizer, scheduler and RNGs.

        Returns ``{"step": N, "extra": ...}`` (what ``save`` was given), or None when there is
        none (a fresh start). Every rank reads the same files: call it on every rank."""
        path = latest_checkpoint(self.root, PREFIX)
        if path is None:
            return None
        state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
        self._module.load_state_dict(state["model"])
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        rngs = torch.load(path / RNG_FILE, map_location="cpu", weights_only=False)
        set_rng_state(rngs[rank()] if rank() < len(rngs) else rngs[0])
        return {"step": state["step"], "extra": state.get("extra"), "path": str(path)}

    # -- save -----------------------------------------------------------------------------------

    def should_save(self, step: int) -> bool:
        """True at every ``every``-th step, or once a notice arrived on any rank (the ranks agree:
        one small all-reduce per step under torch.distributed)."""
        wanted = self.notice.requested or (self.every > 0 and step % self.every == 0)
        if _distributed() and torch.distributed.get_world_size() > 1:
            flag = torch.tensor([1 if wanted else 0], dtype=torch.int32)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            wanted = bool(flag.item())
        return wanted

    def step_end(self, step: int, extra: Any = None) -> Path | None:
        """Call after each optimizer step: saves when ``should_save`` says so."""
        return self.save(step, extra) if self.should_save(step) else None

    def save(self, step: int, extra: Any = None) -> Path:
        """Write ``step-N`` (every rank must call it; rank 0 writes the files and COMPLETE)."""
        path = self.root / f"{PREFIX}{step}"
        # Cleared before the state is taken: a notice that lands while this save runs asks for
        # another at the next step (cleared after, it was lost once COMPLETE was on disk).
        self.notice.clear()
        rngs: list[Any] = [rng_state()]
        if _distributed() and torch.distributed.get_world_size() > 1:
            gathered: list[Any] | None = [None] * torch.distributed.get_world_size() if rank() == 0 else None
            torch.distributed.gather_object(rngs[0], gathered, dst=0)
            rngs = list(gathered or [])
        if rank() == 0:
            path.mkdir(parents=True, exist_ok=True)
            torch.save({
                "step": step,
                "model": self._module.state_dict(),
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "extra": extra,
            }, path / STATE_FILE)
            torch.save(rngs, path / RNG_FILE)
            mark_complete(path, step)  # after every rank's part is in: gather_object returned
            prune(self.root, self.keep, PREFIX)
        if _distributed():
            torch.distributed.barrier()  # no rank runs ahead into a checkpoint still being written
        self.saved.append(path)
        return path

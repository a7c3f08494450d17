"""``GpuorchCheckpoint``: gpuorch's checkpoint protocol for a PyTorch Lightning ``Trainer``.

    import lightning.pytorch as pl
    from gpuorch.integrations.lightning import GpuorchCheckpoint, resume_checkpoint

    trainer = pl.Trainer(max_steps=2000, callbacks=[GpuorchCheckpoint(every_n_steps=200)])
    trainer.fit(model, datamodule=data, ckpt_path=resume_checkpoint())   # None: a fresh start

- On the notice signal (``$GPUORCH_CHECKPOINT_SIGNAL``) the callback saves at the next batch
  boundary (``on_train_batch_end``: the optimizer step is done), then training goes on; the
  agent uploads that checkpoint. ``every_n_steps`` saves on a schedule too.
- Each checkpoint is a directory ``step-N`` under ``$GPUORCH_CHECKPOINT_DIR`` holding Lightning's
  own ``model.ckpt`` (``trainer.save_checkpoint``: model, optimizers, schedulers, loops, callbacks,
  precision state). Every rank takes part in the save (strategies that shard write every rank's
  part), then a barrier; only rank 0 writes ``COMPLETE``, after all ranks have saved.
- The ranks agree on when to save (a notice seen by any rank counts for all:
  ``strategy.reduce_boolean_decision``), so they save at the same step.
- ``resume_checkpoint()`` is the newest complete checkpoint's ``model.ckpt`` (what the agent
  restored), or None; ``trainer.fit(..., ckpt_path=...)`` restores from it.

Imports Lightning (the ``lightning`` package's ``lightning.pytorch``, 2.x) when this module is
imported; ``gpuorch.integrations`` itself does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import Callback

from gpuorch.integrations.protocol import NoticeFlag, checkpoint_dir, latest_checkpoint, mark_complete, prune

PREFIX = "step-"
CKPT = "model.ckpt"


def resume_checkpoint(root: Path | str | None = None) -> str | None:
    """For ``trainer.fit(ckpt_path=...)``: the newest complete checkpoint's file, or None."""
    path = latest_checkpoint(Path(root) if root is not None else checkpoint_dir(), PREFIX)
    return str(path / CKPT) if path is not None and (path / CKPT).is_file() else None


class GpuorchCheckpoint(Callback):
    """Save on the notice at the next batch boundary, and every ``every_n_steps`` optimizer
    steps; keep the newest ``keep`` complete checkpoints locally (the store keeps its own)."""

    def __init__(self, every_n_steps: int | None = None, keep: int = 2, root: Path | str | None = None,
                 install_handler: bool = True) -> None:
        self.every, self.keep = every_n_steps, keep
        self.root = Path(root) if root is not None else checkpoint_dir()
        self.notice = NoticeFlag()
        if install_handler:
            self.notice.install()
        self.saved: list[int] = []  # steps saved by this process (for tests and logs)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = int(trainer.global_step)
        due = bool(self.every) and step > 0 and step % int(self.every or 1) == 0
        if trainer.strategy.reduce_boolean_decision(self.notice.requested or due, all=False):
            self.notice.clear()
            self.save(trainer, step)

    def save(self, trainer: Any, step: int) -> Path:
        """Write ``step-<step>/model.ckpt`` on every rank, then (rank 0) ``COMPLETE``."""
        path = self.root / f"{PREFIX}{step}"
        if trainer.is_global_zero:
            path.mkdir(parents=True, exist_ok=True)
        trainer.strategy.barrier("gpuorch-save-start")
        trainer.save_checkpoint(str(path / CKPT))
        trainer.strategy.barrier("gpuorch-saved")  # every rank's part of the checkpoint is written
        if trainer.is_global_zero:
            mark_complete(path, step)
            prune(self.root, self.keep, PREFIX)
        self.saved.append(step)
        return path

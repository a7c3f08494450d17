"""``GpuorchCallback``: gpuorch's checkpoint protocol for a Hugging Face ``transformers.Trainer``.

    from gpuorch.integrations.hf import GpuorchCallback, resume_checkpoint
    from gpuorch.integrations.protocol import checkpoint_dir

    args = TrainingArguments(output_dir=str(checkpoint_dir()), save_steps=200, save_total_limit=2, ...)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[GpuorchCallback()])
    trainer.train(resume_from_checkpoint=resume_checkpoint())

- On the notice signal (``$GPUORCH_CHECKPOINT_SIGNAL``) the Trainer saves at the next step
  boundary (``control.should_save``), then trains on; the agent uploads that checkpoint.
- After each save of ``checkpoint-N`` (the Trainer's own, at ``save_steps``, included), rank 0
  writes ``COMPLETE`` in it, after every rank has finished saving (a barrier), so the agent
  uploads only whole checkpoints.
- ``resume_checkpoint()`` is the newest complete ``checkpoint-N`` (what the agent restored), or
  None: the Trainer then restores model, optimizer, scheduler, RNG states and the data position.

Imports transformers when this module is imported; ``gpuorch.integrations`` itself does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gpuorch.integrations.protocol import NoticeFlag, checkpoint_dir, latest_checkpoint, mark_complete

PREFIX = "checkpoint-"  # the Trainer's PREFIX_CHECKPOINT_DIR


def resume_checkpoint(root: Path | str | None = None) -> str | None:
    """For ``trainer.train(resume_from_checkpoint=...)``: the newest complete checkpoint's path."""
    path = latest_checkpoint(Path(root) if root is not None else checkpoint_dir(), PREFIX)
    return str(path) if path is not None else None


def _distributed() -> Any:
    import torch.distributed as dist  # transformers has imported torch already

    return dist if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 else None


class GpuorchCallback(TrainerCallback):
    """Save on the notice at the next step; mark each checkpoint complete (see the module)."""

    def __init__(self, install_handler: bool = True) -> None:
        self.notice = NoticeFlag()
        if install_handler:
            self.notice.install()

    def _agreed(self, wanted: bool) -> bool:
        """A notice seen by any rank counts for all: they must save at the same step."""
        dist = _distributed()
        if dist is None:
            return wanted
        import torch

        flag = torch.tensor([1 if wanted else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self._agreed(self.notice.requested):
            control.should_save = True
            self.notice.clear()
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        dist = _distributed()
        if dist is not None:
            dist.barrier()  # every rank's part of the checkpoint is written
        path = Path(args.output_dir) / f"{PREFIX}{state.global_step}"
        if state.is_world_process_zero and path.is_dir():
            mark_complete(path, state.global_step)
        return control

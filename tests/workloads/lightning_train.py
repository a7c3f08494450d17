"""A tiny PyTorch Lightning job for test_lightning_resume.py, run the way the agent runs a job.

A 2-layer MLP regressing a fixed random target, full-batch (one batch per epoch, no shuffling,
no dropout: a resumed run sees exactly the data and randomness an uninterrupted one sees), AdamW
with a StepLR schedule, ``GpuorchCheckpoint`` saving every ``CKPT_EVERY`` steps and on the
notice signal, resumed from ``resume_checkpoint()``. Under torchrun (``WORLD_SIZE`` > 1) it
trains DDP on gloo. Writes ``{"steps", "first_step", "final_loss"}`` to ``$GPUORCH_RESULT_FILE``.

Environment: STEPS, CKPT_EVERY, SEED, STEP_SLEEP (seconds per step, to leave time for a notice).
"""

from __future__ import annotations

import json
import os
import time

import lightning.pytorch as pl
import torch

from gpuorch.integrations.lightning import GpuorchCheckpoint, resume_checkpoint

STEPS = int(os.environ.get("STEPS", "30"))
EVERY = int(os.environ.get("CKPT_EVERY", "10"))
SEED = int(os.environ.get("SEED", "3"))
SLEEP = float(os.environ.get("STEP_SLEEP", "0"))
torch.set_num_threads(1)


class Mlp(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
        self.last = float("nan")
        self.first_step = -1

    def on_train_start(self) -> None:
        self.first_step = int(self.trainer.global_step)  # > 0: restored from a checkpoint

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.last = float(loss.detach())
        if SLEEP:
            time.sleep(SLEEP)
        return loss

    def configure_optimizers(self) -> object:
        opt = torch.optim.AdamW(self.parameters(), lr=1e-2)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 7, 0.5),
                                                   "interval": "step"}}


def main() -> None:
    pl.seed_everything(SEED, verbose=False)
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(64, 8, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=False)
    model = Mlp()
    ckpt = GpuorchCheckpoint(every_n_steps=EVERY)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    trainer = pl.Trainer(max_steps=STEPS, max_epochs=-1, callbacks=[ckpt], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                         devices=world if world > 1 else 1, num_nodes=1,
                         strategy="ddp" if world > 1 else "auto", deterministic=True)
    start = resume_checkpoint()
    if start:
        print(f"resuming from {os.path.basename(os.path.dirname(start))}", flush=True)
    trainer.fit(model, train_dataloaders=data, ckpt_path=start)
    with torch.no_grad():
        final = float(torch.nn.functional.mse_loss(model.net(x), y))
    if trainer.is_global_zero and os.environ.get("GPUORCH_RESULT_FILE"):
        with open(os.environ["GPUORCH_RESULT_FILE"], "w") as f:
            json.dump({"steps": int(trainer.global_step), "first_step": model.first_step, "final_loss": final}, f)
    if torch.distributed.is_initialized():  # gloo's threads left to interpreter exit aborted a rank once (SIGABRT)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

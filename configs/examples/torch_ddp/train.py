"""A real PyTorch job with drop-in gpuorch checkpointing (gpuorch.integrations.pytorch).

An MLP with dropout learns a fixed synthetic regression task with AdamW and a step LR schedule.
Run it as a single process (``python train.py``) or data-parallel under torchrun (gloo on CPU,
NCCL where there are GPUs): ``torchrun --nnodes 2 --nproc-per-node 1 ... train.py``. gpuorch
sets torchrun's rendezvous variables on every node of a ``nodes: N`` job.

Resuming is exact: ``TorchCheckpointer`` saves the model, optimizer, scheduler, every rank's
RNG (the dropout masks) and the data position (epoch, batch), and each epoch's order comes from
a generator seeded by the epoch, so an interrupted-and-resumed run ends with bitwise the loss of
an uninterrupted one (one CPU thread: a different thread count would sum differently).

Environment (all optional): STEPS (400), CKPT_EVERY (100), STEP_SLEEP (0), SEED (0), LR (0.003).
On the notice signal (SIGUSR1 by default) it checkpoints at the next step and keeps training.
"""

from __future__ import annotations

import gc
import json
import os
import time

# The notice may come while torch loads: install the handler first (the checkpointer reuses it).
from gpuorch.integrations.protocol import NoticeFlag

notice = NoticeFlag().install()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from gpuorch.integrations.pytorch import TorchCheckpointer  # noqa: E402

N_SAMPLES, N_IN, N_HIDDEN, BATCH = 2048, 32, 128, 64


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)  # fixed, never checkpointed
    x = torch.randn(N_SAMPLES, N_IN, generator=g)
    teacher = torch.randn(N_IN, 1, generator=g)
    return x, torch.tanh(x @ teacher) + 0.1 * torch.randn(N_SAMPLES, 1, generator=g)


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    steps = int(os.environ.get("STEPS", "400"))
    every = int(os.environ.get("CKPT_EVERY", "100"))
    step_sleep = float(os.environ.get("STEP_SLEEP", "0"))
    seed = int(os.environ.get("SEED", "0"))
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)

    torch.manual_seed(seed)
    model: torch.nn.Module = torch.nn.Sequential(
        torch.nn.Linear(N_IN, N_HIDDEN), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(N_HIDDEN, 1))
    torch.manual_seed(seed + 1 + rank)  # each rank its own dropout masks
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(os.environ.get("LR", "3e-3")))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=150, gamma=0.5)
    ckpt = TorchCheckpointer(model, optimizer, scheduler, every=every, install_handler=False)
    ckpt.notice = notice

    x, y = data()
    start = ckpt.restore()
    step = start["step"] if start else 0
    epoch, skip = (start["extra"]["epoch"], start["extra"]["batch"]) if start else (0, 0)
    print(f"resuming from {os.path.basename(start['path'])} at step {step}" if start else "starting fresh",
          flush=True)
    per_rank = N_SAMPLES // world
    loss = torch.tensor(0.0)
    while step < steps:
        order = torch.randperm(N_SAMPLES, generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        mine = order[rank * per_rank:(rank + 1) * per_rank]
        batches = mine.split(BATCH)
        for i in range(skip, len(batches)):
            model.train()
            idx = batches[i]
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            if step_sleep:
                time.sleep(step_sleep)
            ckpt.step_end(step, extra={"epoch": epoch, "batch": i + 1})
            if step >= steps:
                break
        else:
            epoch, skip = epoch + 1, 0
            continue
        break

    model.eval()
    with torch.no_grad():
        final = float(torch.nn.functional.mse_loss(model(x), y))
    if rank == 0:
        print(f"done at step {step}: final loss {final!r}", flush=True)
        result = os.environ.get("GPUORCH_RESULT_FILE")
        if result:
            with open(result, "w") as f:
                json.dump({"final_loss": final, "steps": step}, f)
    if distributed:
        # DDP's reducer holds the process group: drop it, and agree every rank got here, while
        # all are still connected; torn down only as a peer exits, gloo could hang in teardown.
        del ckpt, optimizer, scheduler, model, loss
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""gpuorch.integrations.lightning on real PyTorch Lightning (CPU): the callback saves on the
notice at the next batch boundary, marks each checkpoint COMPLETE (rank 0, after every rank
saved), and a run interrupted there (SIGKILL, as a reclaim) and resumed with
``trainer.fit(ckpt_path=resume_checkpoint())`` ends with the uninterrupted loss, as two DDP
ranks under torchrun (the ranks agree on the notice step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch_runs

pytestmark = [pytest.mark.workloads, pytest.mark.timeout(900)]

torch_runs.require("torch", "lightning")

SCRIPT = Path(__file__).with_name("lightning_train.py")
ENV = {"STEPS": "30", "CKPT_EVERY": "10", "SEED": "5"}


# Two ranks only: rank 0 does all that one process does, plus the agreement and the barrier, and
# each Lightning start costs seconds (the suite's time budget, docs/development.md).
@pytest.mark.parametrize("nproc", [2], ids=["ddp-2-ranks"])
def test_lightning_interrupted_on_notice_and_resumed_ends_with_the_uninterrupted_loss(tmp_path, nproc):
    reference = torch_runs.run(SCRIPT, tmp_path, ENV, "ref", nproc)
    proc = torch_runs.start(SCRIPT, tmp_path, {**ENV, "STEP_SLEEP": "0.15"}, "cut", nproc)
    ckpt = tmp_path / "cut-ckpt"
    noticed = torch_runs.interrupt(proc, ckpt, "step-", periodic=10)
    assert 10 < noticed < 30
    marker = json.loads((ckpt / f"step-{noticed}" / "COMPLETE").read_text())
    assert marker["step"] == noticed and (ckpt / f"step-{noticed}" / "model.ckpt").is_file()
    resumed = torch_runs.run(SCRIPT, tmp_path, ENV, "cut", nproc)
    assert f"resuming from step-{noticed}" in (tmp_path / "cut.log").read_text()
    assert resumed["steps"] == reference["steps"] == 30
    assert (reference["first_step"], resumed["first_step"]) == (0, noticed)  # it trained only the rest
    assert resumed["final_loss"] == reference["final_loss"]  # bitwise on CPU, one thread

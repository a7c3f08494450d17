"""gpuorch.integrations.hf on the real transformers + peft (CPU, offline): the hf_lora example
(a tiny Llama built from a config, LoRA adapters) saves on the notice at the next step, marks
each Trainer checkpoint COMPLETE, and a run interrupted there and resumed with
``resume_from_checkpoint`` ends with the uninterrupted loss, as one process and as two DDP ranks
under torchrun (the ranks agree on the notice step; rank 0 writes COMPLETE after a barrier)."""

from __future__ import annotations

import json

import pytest
import torch_runs

pytestmark = [pytest.mark.workloads, pytest.mark.timeout(900)]  # slow on a loaded machine

torch_runs.require("torch", "transformers", "peft")

SCRIPT = torch_runs.EXAMPLES / "hf_lora" / "train.py"
ENV = {"STEPS": "40", "CKPT_EVERY": "10", "SEED": "5"}


@pytest.mark.parametrize("nproc", [1, 2], ids=["one-process", "ddp-2-ranks"])
def test_trainer_interrupted_on_notice_and_resumed_ends_with_the_uninterrupted_loss(tmp_path, nproc):
    reference = torch_runs.run(SCRIPT, tmp_path, ENV, "ref", nproc)
    proc = torch_runs.start(SCRIPT, tmp_path, {**ENV, "STEP_SLEEP": "0.15"}, "cut", nproc)
    ckpt = tmp_path / "cut-ckpt"
    noticed = torch_runs.interrupt(proc, ckpt, "checkpoint-", periodic=10)
    assert 10 < noticed < 40
    assert json.loads((ckpt / f"checkpoint-{noticed}" / "COMPLETE").read_text())["step"] == noticed
    resumed = torch_runs.run(SCRIPT, tmp_path, ENV, "cut", nproc)
    assert f"resuming from checkpoint-{noticed}" in (tmp_path / "cut.log").read_text()
    assert resumed["steps"] == reference["steps"] == 40
    assert resumed["final_loss"] == reference["final_loss"]  # bitwise on CPU, one thread

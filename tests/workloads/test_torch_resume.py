"""gpuorch.integrations.pytorch on the real PyTorch (CPU): the torch_ddp example checkpoints at
once on the notice, and a run interrupted there and resumed ends with bitwise the loss of an
uninterrupted one, as one process and as two DDP ranks (gloo) under torchrun."""

from __future__ import annotations

import pytest
import torch_runs

pytestmark = [pytest.mark.workloads, pytest.mark.timeout(900)]  # slow on a loaded machine

torch_runs.require("torch")

SCRIPT = torch_runs.EXAMPLES / "torch_ddp" / "train.py"
ENV = {"STEPS": "240", "CKPT_EVERY": "60", "SEED": "3"}


@pytest.mark.parametrize("nproc", [1, 2], ids=["one-process", "ddp-2-ranks"])
def test_interrupted_on_notice_and_resumed_ends_with_the_uninterrupted_loss(tmp_path, nproc):
    reference = torch_runs.run(SCRIPT, tmp_path, ENV, "ref", nproc)
    proc = torch_runs.start(SCRIPT, tmp_path, {**ENV, "STEP_SLEEP": "0.02"}, "cut", nproc)
    ckpt = tmp_path / "cut-ckpt"
    noticed = torch_runs.interrupt(proc, ckpt, "step-", periodic=60)
    assert 60 < noticed < 240
    rng = ckpt / f"step-{noticed}" / "rng.pt"
    saved = torch_runs.python("import sys, torch; print(len(torch.load(sys.argv[1], weights_only=False)))", str(rng))
    assert int(saved) == nproc  # rank 0 gathered every rank's generators before COMPLETE
    resumed = torch_runs.run(SCRIPT, tmp_path, {**ENV, "GPUORCH_RESUMED_FROM": f"step-{noticed}"}, "cut", nproc)
    assert f"resuming from step-{noticed}" in (tmp_path / "cut.log").read_text()
    assert resumed["steps"] == reference["steps"] == 240
    assert resumed["final_loss"] == reference["final_loss"]  # bitwise


# Run in a child: torch stays out of the pytest worker (torch_runs.require).
NOTICE_DURING_SAVE = """
import sys
from pathlib import Path

import torch

from gpuorch.integrations import pytorch as integration

root = Path(sys.argv[1])
ckpt = integration.TorchCheckpointer(torch.nn.Linear(2, 1), every=60, root=root, install_handler=False)
real = integration.mark_complete


def complete_then_notice(path, step):
    real(path, step)
    ckpt.notice.requested = True  # the signal handler's effect, as the marker appears


integration.mark_complete = complete_then_notice
assert ckpt.step_end(60) is not None
integration.mark_complete = real
assert ckpt.should_save(61)  # not a multiple of 60: only the notice asks for it
assert ckpt.step_end(61) == root / "step-61"
assert not ckpt.should_save(62)
print("ok")
"""


def test_a_notice_that_lands_during_a_save_is_answered_by_the_next_step(tmp_path):
    """The harness (and an agent) sends the notice as soon as it sees a COMPLETE marker, which
    can be before the save that wrote it returns: that notice must not be cleared with it."""
    assert torch_runs.python(NOTICE_DURING_SAVE, str(tmp_path)).strip() == "ok"

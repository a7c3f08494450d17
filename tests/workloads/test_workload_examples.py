"""The workload examples in configs/examples/ are valid job specs (load_spec, as submit reads them)."""

from __future__ import annotations

import pytest

from gpuorch.jobs.spec import load_spec
from gpuorch.testing.e2e import TINY_MLP

EXAMPLES = TINY_MLP.parent


@pytest.mark.parametrize("name", ["torch-ddp.yaml", "hf-lora.yaml"])
def test_workload_examples_load(name):
    spec = load_spec(EXAMPLES / name)
    assert spec.checkpoint is not None and (EXAMPLES / str(spec.workdir) / "train.py").is_file()

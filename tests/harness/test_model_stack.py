"""model.stack through the assembled daemon (issue 36): a job naming its training stack is sized
with the stack's defaults and runs; a stack it contradicts is refused at submit, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import load_stored
from gpuorch.store.models import Job
from gpuorch.testing.daemon import AssembledDaemon

MODEL = {"preset": "llama-3.1-8b", "seq_len": 2048, "micro_batch": 1}


def test_a_job_naming_its_stack_is_stored_with_it_and_runs(tmp_path: Path) -> None:
    with AssembledDaemon.start(tmp_path / "home", "") as d:
        job_id = d.submit({"name": "tune", "run": "true", "model": MODEL | {"method": "qlora", "stack": "torchtune"}})
        stored = d.job(job_id)
        assert stored is not None
        d.until_terminal(job_id)
        spec = load_stored(stored.spec)  # the daemon's own reading of the stored spec
        assert spec.model is not None and spec.model.stack == "torchtune" and spec.model.loss_mode == "chunked"


@pytest.mark.parametrize(("model", "extra", "field"), [
    ({"stack": "megatron"}, {}, "stack"),
    ({"stack": "torchtune", "method": "qlora", "offload": "params"}, {"distributed": {"strategy": "none"}}, "offload"),
    ({"stack": "unsloth", "method": "qlora"}, {"distributed": {"strategy": "zero3", "degree": 2},
                                               "resources": {"gpu": "A100:2"}}, "distributed"),
])
def test_a_contradiction_is_refused_at_submit_and_nothing_is_stored(tmp_path: Path, model, extra, field) -> None:
    with AssembledDaemon.start(tmp_path / "home", "") as d:
        with pytest.raises(UserInputError) as e:
            d.submit({"name": "bad", "run": "true", "model": MODEL | model} | extra)
        assert field in str(e.value) and "\n" not in str(e.value)
        with d.store.read() as s:
            assert s.exec(select(Job)).all() == []

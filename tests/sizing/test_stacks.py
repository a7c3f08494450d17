"""model.stack (issue 36): each training stack's defaults fill the knobs a job leaves unset, explicit
knobs win, the assumptions are printed, contradictions are refused with one line, and offload:
params keeps only the layers in flight for LoRA/QLoRA too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import parse_spec
from gpuorch.sizing import Workload, estimate_memory
from gpuorch.sizing.stacks import KNOBS, STACKS, stack_defaults

runner = CliRunner()
BASE = {"preset": "llama-3.1-8b", "seq_len": 4096, "micro_batch": 1}


def _w(**kw) -> Workload:
    return Workload.model_validate(BASE | kw)


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_every_knob_left_unset_comes_from_the_stack(stack, method):
    if stack == "torchtitan" and method == "qlora":
        pytest.skip("refused: torchtitan has no NF4 base")
    w = _w(stack=stack, method=method)
    want = stack_defaults(stack, method, False, w.n_params)
    k = w.knobs
    for name in KNOBS:
        if name == "master_weights" and method != "full":
            continue
        assert getattr(k, name) == want[name], (stack, method, name)
        assert name in k.from_stack


@pytest.mark.parametrize("stack", STACKS)
def test_an_explicit_knob_wins_over_the_stack(stack):
    method = "lora"
    for name, value in (("loss", "fused"), ("activation_checkpointing", "selective"), ("adapter_dtype", "bf16"),
                        ("optimizer", "sgd"), ("compile", True), ("offload", ("optimizer",))):
        w = _w(stack=stack, method=method, **{name: value})
        assert getattr(w.knobs, name) == value and name not in w.knobs.from_stack


def test_the_stacks_differ_where_their_recipes_do():
    hf, tune, unsloth = (_w(stack=s, method="qlora") for s in ("hf", "torchtune", "unsloth"))
    assert (hf.loss_mode, tune.loss_mode, unsloth.loss_mode) == ("eager", "chunked", "fused")
    assert unsloth.knobs.offload == ("activations",) and hf.knobs.adapter_dtype == "fp32"
    assert estimate_memory(unsloth).per_gpu_gib < estimate_memory(tune).per_gpu_gib < estimate_memory(hf).per_gpu_gib
    one = _w(stack="torchtune", method="full")  # the single-device recipe: 8-bit paged Adam stepped in backward
    assert one.knobs.optimizer == "paged-adamw-8bit" and one.knobs.optimizer_in_backward
    many = _w(stack="torchtune", method="full", distributed={"strategy": "fsdp", "degree": 8})
    assert many.knobs.optimizer == "adamw" and not many.knobs.optimizer_in_backward
    assert _w(stack="torchtitan", method="full").ac_mode == "selective"
    assert Workload(preset="llama-3.1-70b", stack="torchtitan").ac_mode == "full"


def test_no_stack_is_hf_and_a_stored_spec_round_trips():
    assert _w().stack == "hf" and _w(method="qlora").knobs == _w(method="qlora", stack="hf").knobs
    spec = parse_spec({"name": "s", "run": "x", "model": BASE | {"method": "qlora", "stack": "unsloth"}})
    again = type(spec).model_validate_json(spec.model_dump_json())
    assert again == spec and again.model is not None and again.model.knobs.loss == "fused"


@pytest.mark.parametrize(("model", "distributed", "field"), [
    ({"stack": "nemo"}, None, "stack"),
    ({"stack": 3}, None, "stack"),
    ({"stack": "torchtitan", "method": "qlora"}, None, "stack"),
    ({"stack": "torchtune", "method": "lora"}, {"strategy": "zero3"}, "distributed"),
    ({"stack": "torchtitan"}, {"strategy": "zero2"}, "distributed"),
    ({"stack": "unsloth", "method": "qlora"}, {"strategy": "fsdp"}, "distributed"),
    ({"stack": "unsloth", "method": "qlora", "offload": "params"}, None, "offload"),
    ({"stack": "torchtune", "method": "qlora", "offload": "params"}, None, "offload"),
    ({"stack": "torchtune", "method": "full", "offload": "params,optimizer"}, {"strategy": "none"}, "offload"),
    ({"stack": "torchtitan", "method": "full", "offload": "params"}, {"strategy": "ddp"}, "offload"),
    ({"stack": "axolotl", "method": "inference"}, None, "stack"),
])
def test_contradictions_are_one_line_naming_the_field(model, distributed, field):
    data = {"name": "s", "run": "x", "model": BASE | model} | ({"distributed": distributed} if distributed else {})
    with pytest.raises((UserInputError, ValidationError)) as e:
        parse_spec(data, "job.yaml")
    msg = str(e.value)
    assert "\n" not in msg.strip() and field in msg.split(";")[0], msg


def test_what_the_stack_supports_is_accepted():
    for model, distributed in (({"stack": "unsloth", "method": "full"}, None),  # FastLanguageModel full_finetuning
                               ({"stack": "unsloth", "method": "lora"}, {"strategy": "ddp"}),
                               ({"stack": "torchtune", "method": "qlora", "offload": "params"}, {"strategy": "fsdp"}),
                               ({"stack": "hf", "method": "qlora", "offload": "params"}, None),  # ZeRO-3 offload
                               ({"stack": "torchtitan", "method": "lora"}, {"strategy": "fsdp"})):
        data = {"name": "s", "run": "x", "model": BASE | model} | ({"distributed": distributed} if distributed else {})
        parse_spec(data, "job.yaml")


def test_adapter_offload_keeps_only_the_layers_in_flight():
    for method in ("lora", "qlora"):
        kept = estimate_memory(Workload(preset="llama-3.1-70b", method=method, stack="hf"))
        off = estimate_memory(Workload(preset="llama-3.1-70b", method=method, stack="hf", offload="params"))
        assert off.breakdown["weights"] < kept.breakdown["weights"] / 20
        assert off.breakdown["optimizer"] == 0 and off.breakdown["adapters"] < kept.breakdown["adapters"] / 20
        assert off.breakdown["activations"] == kept.breakdown["activations"]
    # a 70B QLoRA with its base on the host fits a 24 GB card; without, it does not
    q = dict(preset="llama-3.1-70b", method="qlora", stack="hf", seq_len=2048, loss="chunked")
    assert estimate_memory(Workload(**q, offload="params")).per_gpu_gib < 20
    assert estimate_memory(Workload(**q)).per_gpu_gib > 30
    act = estimate_memory(Workload(**q, offload="params,activations"))
    assert act.breakdown["activations"] < estimate_memory(Workload(**q, offload="params")).breakdown["activations"]


def _estimate(*args: str):
    return runner.invoke(app, ["estimate", *args])


def test_estimate_stack_prints_its_assumptions_and_explicit_knobs_are_not_among_them():
    r = _estimate("--preset", "llama-3.1-8b", "--method", "qlora", "--stack", "torchtune", "--loss", "fused")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("from stack torchtune"))
    assert "adapter_dtype bf16" in line and "activation_checkpointing full" in line and "loss" not in line
    data = json.loads(runner.invoke(app, ["estimate", "--preset", "llama-3.1-8b", "--method", "qlora", "--stack",
                                          "unsloth", "--json"]).stdout)
    assert data["workload"]["stack"] == "unsloth" and data["workload"]["from_stack"]["loss"] == "fused"


@pytest.mark.parametrize(("args", "flag"), [
    (["--stack", "deepspeed"], "--stack"),
    (["--stack", "unsloth", "--method", "qlora", "--distributed", "fsdp", "--gpus", "2"], "--distributed"),
    (["--stack", "torchtune", "--method", "lora", "--offload", "params", "--distributed", "none"], "--offload"),
])
def test_estimate_refuses_a_contradiction_with_one_line_and_exit_2(args, flag):
    r = _estimate("--preset", "llama-3.1-8b", *args)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and flag in r.output, r.output


def test_help_lists_every_preset_and_stack():
    from gpuorch.sizing import PRESETS

    out = runner.invoke(app, ["estimate", "--help"], env={"COLUMNS": "300", "TERMINAL_WIDTH": "300"}).stdout
    flat = "".join(out.replace("│", " ").split())  # rich wraps the help text: compare without whitespace
    for name in [*PRESETS, *STACKS]:
        assert name in flat, name
    assert flat.count("llama-") >= len(PRESETS)


def test_plan_prints_the_assumptions_and_refuses_a_contradiction(tmp_path: Path):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"name": "s", "run": "x", "model": BASE | {"method": "qlora", "stack": "axolotl",
                                                                             "tokens": "1B"}}))
    r = runner.invoke(app, ["plan", str(job), "--price-list", "--top", "1"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert any(x.startswith("model: from stack axolotl") and "optimizer paged-adamw" in x for x in lines)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "s", "run": "x", "distributed": {"strategy": "none"},
                                   "model": BASE | {"method": "qlora", "stack": "torchtune", "offload": "params"}}))
    r = runner.invoke(app, ["plan", str(bad), "--price-list"])
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "model.offload" in r.output, r.output

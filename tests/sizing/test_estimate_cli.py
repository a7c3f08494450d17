"""gpuorch estimate's new flags: the knobs of the model block, the architecture's MLP width and
tied embeddings, and one-line errors naming the flag."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app

runner = CliRunner()
LLAMA3 = ["--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--vocab", "128256"]


def estimate(*args: str) -> dict:
    r = runner.invoke(app, ["estimate", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_intermediate_and_tied_embeddings_shape_the_model():
    wide = estimate(*LLAMA3, "--intermediate", "14336")
    narrow = estimate(*LLAMA3)  # 8/3 x 4096 = 11008 (rounded to 256): a Llama-2 MLP
    assert wide["workload"]["params"] == pytest.approx(8.03e9, rel=1e-3) and narrow["workload"]["params"] < 7.5e9
    tied = estimate(*LLAMA3, "--intermediate", "14336", "--tied-embeddings")
    assert wide["workload"]["params"] - tied["workload"]["params"] == 128256 * 4096


def test_the_knobs_reach_the_estimate():
    base = estimate("--preset", "llama-3.1-8b", "--method", "qlora", "--seq-len", "8192")
    fused = estimate("--preset", "llama-3.1-8b", "--method", "qlora", "--seq-len", "8192", "--loss", "fused",
                     "--offload", "activations", "--adapter-dtype", "bf16")
    assert fused["per_gpu_gib"] < base["per_gpu_gib"] / 2
    assert fused["workload"]["loss"] == "fused" and fused["workload"]["offload"] == ["activations"]
    pure = estimate("--preset", "llama-3.1-8b", "--no-master-weights", "--optimizer-state-dtype", "bf16",
                    "--activation-checkpointing", "full", "--compile")
    assert pure["breakdown"]["optimizer"] == pytest.approx(8.03e9 * 4 / 2**30, rel=1e-2)
    kv = estimate("--preset", "llama-3.1-8b", "--method", "inference", "--seq-len", "32768", "--kv-cache-dtype",
                  "fp8", "--max-batched-tokens", "2048")
    assert kv["breakdown"]["kv_cache"] == pytest.approx(32768 * 2 * 32 * 1024 / 2**30)
    z3 = estimate("--preset", "llama-3.1-8b", "--distributed", "zero3", "--gpus", "8")
    assert z3["sharding"] == "zero3" and {f["sharding"] for f in z3["fits"]} <= {"zero3", "none"}


@pytest.mark.parametrize("args, line", [
    (["--params", "8B", "--method", "inference", "--offload", "optimizer"], "error: --offload: offload moves"),
    (["--params", "8B", "--method", "inference", "--loss", "eager"], "error: --loss: inference computes no loss"),
    (["--preset", "llama-3-8b", "--seq-len", "9000"], "error: --seq-len: seq_len 9000 is longer than llama-3-8b's"),
    (["--params", "8B", "--distributed", "zero3"], "error: --distributed: zero3 with degree 1 (one GPU)"),
    (["--params", "8B", "--intermediate", "14336"], "error: --intermediate and --tied-embeddings describe"),
    (["--params", "8B", "--loss", "sparse"], "error: --loss:"),
])
def test_bad_input_is_one_line_naming_the_flag(args, line):
    r = runner.invoke(app, ["estimate", *args])
    assert r.exit_code == 2 and r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.output


def test_fabric_sets_the_network_of_multi_node_layouts():
    args = ["--preset", "llama-3.1-70b", "--method", "full", "--tokens", "1B", "--seq-len", "4096",
            "--activation-checkpointing", "full"]
    unknown, efa = estimate(*args), estimate(*args, "--fabric", "efa:3200")
    assert unknown["fabric"] is None and efa["fabric"] == {"kind": "efa", "gbps": 3200.0}
    multi = [(u, e) for u, e in zip(unknown["fits"], efa["fits"], strict=True) if u["nodes"] > 1]
    one = [(u, e) for u, e in zip(unknown["fits"], efa["fits"], strict=True) if u["nodes"] == 1]
    assert multi and all(e["est_hours"] < u["est_hours"] for u, e in multi)  # 100 Gb/s Ethernet is slower
    assert all(e["est_hours"] == u["est_hours"] for u, e in one)  # one node: no fabric involved
    r = runner.invoke(app, ["estimate", "--params", "7B", "--fabric", "myrinet:10"])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].startswith("error: --fabric: 'myrinet:10' is not")

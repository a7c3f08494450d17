"""``gpuorch estimate``: GPU memory per GPU, the smallest configurations that fit, and runtimes
with ``--tokens``. Read-only, never calls a cloud (``planning.py`` has ``offers`` and ``plan``).

Its options are module constants, so the command's signature names them in groups (the model and
its architecture, the training knobs, the layout) and its body reads by step: the architecture,
the workload, the fabric, the report, then the text. Imports stay inside the command: the console
script imports this module alone for ``gpuorch estimate``, and nothing here loads pydantic or
the sizing model until the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from gpuorch.bounds import MAX_GPUS, MAX_NODES, fix_hint
from gpuorch.cli.app import JSON_OPTION, app, emit_json, fail
from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    from gpuorch.sizing.fabric import Fabric

_FLAG = {"params": "--params", "seq_len": "--seq-len", "micro_batch": "--micro-batch", "lora_rank": "--lora-rank",
         "lora_targets": "--lora-targets", "kv_heads": "--kv-heads", "tokens": "--tokens", "strategy": "--distributed",
         "degree": "--gpus", "distributed": "--distributed", "compile": "--compile"}  # fmt: skip

PARAMS_OPTION = typer.Option(None, "--params", help="Parameters: 7B, 70e9, 350M.")
PRESET_OPTION = typer.Option(None, "--preset", help="Architecture preset: llama-2-7b, mistral-7b, llama-3-8b, "
                             "llama-3.1-8b, llama-2-13b, llama-2-70b, llama-3-70b, llama-3.1-70b, llama-3.1-405b.")
STACK_OPTION = typer.Option(None, "--stack", help="Training stack whose defaults fill the knobs not given: hf "
                            "(default), torchtune, unsloth, axolotl, llama-factory, torchtitan.")
LAYERS_OPTION = typer.Option(None, "--layers", min=1, max=100_000, help="Architecture: transformer layers.")
HIDDEN_OPTION = typer.Option(None, "--hidden", min=1, max=10**7, help="Architecture: hidden size.")
HEADS_OPTION = typer.Option(None, "--heads", min=1, max=100_000, help="Architecture: attention heads.")
KV_HEADS_OPTION = typer.Option(None, "--kv-heads", min=1, max=100_000, help="Architecture: KV heads (GQA).")
VOCAB_OPTION = typer.Option(None, "--vocab", min=1, max=10**9, help="Architecture: vocabulary size.")
INTERMEDIATE_OPTION = typer.Option(None, "--intermediate", min=1, max=10**8,
                                  help="Architecture: MLP width (default 8/3 x hidden).")
TIED_EMBEDDINGS_OPTION = typer.Option(None, "--tied-embeddings/--untied-embeddings",
                                      help="Architecture: LM head shares the embedding (default untied).")
METHOD_OPTION = typer.Option("full", "--method", help="full | lora | qlora | inference.")
PRECISION_OPTION = typer.Option("bf16", "--precision", help="bf16 | fp16 | fp8 | int8 | int4.")
OPTIMIZER_OPTION = typer.Option(None, "--optimizer",
                                help="adamw | adamw-8bit | paged-adamw | paged-adamw-8bit | sgd (default: "
                                "the stack's).")
OPTIMIZER_STATE_DTYPE_OPTION = typer.Option(None, "--optimizer-state-dtype",
                                            help="fp32 | bf16 (default: the stack's).")
MASTER_WEIGHTS_OPTION = typer.Option(None, "--master-weights/--no-master-weights",
                                     help="Full fine-tuning: an fp32 master copy (default: yes).")
ADAPTER_DTYPE_OPTION = typer.Option(None, "--adapter-dtype", help="LoRA adapters: fp32 (PEFT) | bf16 (default: "
                                    "the stack's).")
ACTIVATION_CHECKPOINTING_OPTION = typer.Option(None, "--activation-checkpointing",
                                               help="none | selective | full (default: the stack's).")
LOSS_OPTION = typer.Option(None, "--loss", help="eager | chunked | fused (default: the stack's).")
OFFLOAD_OPTION = typer.Option(None, "--offload", help="none, or a list of activations, optimizer, params.")
OPTIMIZER_IN_BACKWARD_OPTION = typer.Option(None, "--optimizer-in-backward",
                                            help="Step each parameter during backward (torchtune).")
COMPILE_OPTION = typer.Option(None, "--compile", help="torch.compile the model and loss.")
KV_CACHE_DTYPE_OPTION = typer.Option(None, "--kv-cache-dtype", help="Inference: auto | bf16 | fp16 | fp8.")
MAX_BATCHED_TOKENS_OPTION = typer.Option(None, "--max-batched-tokens", min=1, max=10**9,
                                         help="Inference: prefill chunk (default 8192, vLLM's).")
STRATEGY_OPTION = typer.Option(None, "--distributed",
                               help="none | ddp | fsdp | zero2 | zero3 | tp (default: explore all).")
SEQ_LEN_OPTION = typer.Option(2048, "--seq-len", min=1, max=10**9, help="Sequence (context) length.")
MICRO_BATCH_OPTION = typer.Option(1, "--micro-batch", min=1, max=10**6,
                                  help="Sequences per GPU per step (inference: concurrent).")
CHECKPOINTING_OPTION = typer.Option(None, "--gradient-checkpointing/--no-gradient-checkpointing",
                                    help="Default: the stack's.")
LORA_RANK_OPTION = typer.Option(16, "--lora-rank", min=1, max=10**6)
LORA_TARGETS_OPTION = typer.Option("all-linear", "--lora-targets",
                                   help="q,k,v,o,gate,up,down, attention, mlp or all-linear.")
SHARDING_OPTION = typer.Option("auto", "--sharding",
                               help="auto | none | zero2 | zero3 | fsdp (inference: tensor parallel).")
GPUS_OPTION = typer.Option(1, "--gpus", max=MAX_GPUS * MAX_NODES, min=1, help="GPUs the job is spread over.")
GPU_OPTION = typer.Option(None, "--gpu", help="Check the fit on this GPU model.")
TOKENS_OPTION = typer.Option(None, "--tokens", help="Tokens to train on (or generate): adds runtime estimates.")
EFFICIENCY_OPTION = typer.Option(None, "--efficiency", min=0.001, max=1,
                                help="Model FLOPs utilisation (default per GPU class).")
FABRIC_OPTION = typer.Option(None, "--fabric", help="Network between nodes for multi-node hours, KIND:GBPS "
                             "(efa:3200, infiniband:1600; default ethernet:100).")


@app.command()
def estimate(
    params: str = PARAMS_OPTION, preset: str = PRESET_OPTION, stack: str = STACK_OPTION,
    layers: int = LAYERS_OPTION, hidden: int = HIDDEN_OPTION, heads: int = HEADS_OPTION,
    kv_heads: int = KV_HEADS_OPTION, vocab: int = VOCAB_OPTION, intermediate: int = INTERMEDIATE_OPTION,
    tied_embeddings: bool = TIED_EMBEDDINGS_OPTION,
    method: str = METHOD_OPTION, precision: str = PRECISION_OPTION, optimizer: str = OPTIMIZER_OPTION,
    optimizer_state_dtype: str = OPTIMIZER_STATE_DTYPE_OPTION, master_weights: bool = MASTER_WEIGHTS_OPTION,
    adapter_dtype: str = ADAPTER_DTYPE_OPTION, activation_checkpointing: str = ACTIVATION_CHECKPOINTING_OPTION,
    loss: str = LOSS_OPTION, offload: str = OFFLOAD_OPTION, optimizer_in_backward: bool = OPTIMIZER_IN_BACKWARD_OPTION,
    compile_: bool = COMPILE_OPTION, kv_cache_dtype: str = KV_CACHE_DTYPE_OPTION,
    max_batched_tokens: int = MAX_BATCHED_TOKENS_OPTION, strategy: str = STRATEGY_OPTION,
    seq_len: int = SEQ_LEN_OPTION, micro_batch: int = MICRO_BATCH_OPTION, checkpointing: bool = CHECKPOINTING_OPTION,
    lora_rank: int = LORA_RANK_OPTION, lora_targets: str = LORA_TARGETS_OPTION, sharding: str = SHARDING_OPTION,
    gpus: int = GPUS_OPTION, gpu: str = GPU_OPTION, tokens: str = TOKENS_OPTION, efficiency: float = EFFICIENCY_OPTION,
    fabric: str = FABRIC_OPTION, json_out: bool = JSON_OPTION,
) -> None:
    """Estimate GPU memory per GPU, and the smallest GPU configurations that fit.

    Example: gpuorch estimate --preset llama-3-8b --method qlora --seq-len 4096
    """
    from gpuorch.sizing.report import estimate_report

    arch = _architecture(layers, hidden, heads, kv_heads, vocab, intermediate, tied_embeddings)
    w = _workload({
        "params": params, "preset": preset, "stack": stack, "architecture": arch, "method": method,
        "precision": precision,
        "optimizer": optimizer, "seq_len": seq_len, "micro_batch": micro_batch, "gradient_checkpointing": checkpointing,
        "lora_rank": lora_rank, "lora_targets": lora_targets, "sharding": sharding, "tokens": tokens,
        "efficiency": efficiency, "optimizer_state_dtype": optimizer_state_dtype, "master_weights": master_weights,
        "adapter_dtype": adapter_dtype, "activation_checkpointing": activation_checkpointing, "loss": loss,
        "offload": offload, "optimizer_in_backward": optimizer_in_backward, "compile": compile_,
        "kv_cache_dtype": kv_cache_dtype, "max_batched_tokens": max_batched_tokens,
        "distributed": {"strategy": strategy, "degree": gpus if strategy != "none" else None} if strategy else None,
    })  # fmt: skip
    net = _fabric(fabric)
    try:
        report = estimate_report(w, gpus, gpu, net)
    except UserInputError as e:
        fail(str(e))
    if json_out:
        emit_json(report)
        return
    _echo_report(report, w, gpus)


def _architecture(layers: int | None, hidden: int | None, heads: int | None, kv_heads: int | None,
                  vocab: int | None, intermediate: int | None, tied: bool | None) -> dict[str, Any] | None:
    """The ``architecture`` of --layers/--hidden/--heads (all three or none), or None."""
    if layers or hidden or heads:
        if not (layers and hidden and heads):
            fail("--layers, --hidden and --heads go together; give all three or use --preset")
        return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "vocab": vocab or 32000,
                "intermediate": intermediate, "tied_embeddings": bool(tied)}
    if intermediate or tied is not None:
        fail("--intermediate and --tied-embeddings describe an architecture; give them with --layers, --hidden "
             "and --heads")
    return None


def _workload(fields: dict[str, Any]) -> Any:
    """The sizing model's workload of the flags given; a bad one fails in one line naming its flag."""
    from pydantic import ValidationError

    from gpuorch.sizing import Workload

    try:
        return Workload.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        err = e.errors()[0]
        msg = fix_hint(err) or str(err["msg"]).removeprefix("Value error, ")
        name = str(err["loc"][-1]) if err["loc"] else ""
        if not name:  # a check across fields: its message starts with the field it blames
            first = msg.split(" ", 1)[0].rstrip(":")
            name = first if first in Workload.model_fields and first != "params" else ""
            msg = msg.removeprefix(f"{name}: ") if name else msg
        where = f"{_FLAG.get(name, '--' + name.replace('_', '-'))}: " if name else ""
        fail(where + msg)


def _fabric(text: str | None) -> Fabric | None:
    """The network between nodes of --fabric KIND:GBPS, or None (the unknown fabric)."""
    from gpuorch.sizing.fabric import parse_fabric

    try:
        return parse_fabric(text) if text is not None else None
    except ValueError as e:
        fail(f"--fabric: {e}")


def _echo_report(report: dict[str, Any], w: Any, gpus: int) -> None:
    """The report as text: the workload, its stack, the memory per GPU, and the configurations that fit."""
    s = report["workload"]
    ac = {"none": "no"}.get(s["activation_checkpointing"], s["activation_checkpointing"])
    extra = f", {ac} checkpointing, {s['loss']} loss" if s["activation_checkpointing"] else ""
    extra += f", offload {'+'.join(s['offload'])}" if s["offload"] else ""
    typer.echo(f"{s['params'] / 1e9:.1f}B params ({s['shape']} shape), {s['method']}, {s['precision']}, "
               f"seq {s['seq_len']} x {s['micro_batch']}{extra}")
    from gpuorch.sizing.report import stack_line

    if (line := stack_line(w)) is not None:
        typer.echo(line)
    on = f"{gpus}x{report['gpu']}" if report["gpu"] else f"{gpus} GPU(s)"
    typer.echo(f"per GPU on {on}, sharding {report['sharding']}:")
    for k, v in report["breakdown"].items():
        typer.echo(f"  {k:<12}{v:>9.2f} GiB")
    typer.echo(f"  {'total':<12}{report['per_gpu_gib']:>9.2f} GiB per GPU, {report['total_gib']:.2f} GiB in all")
    typer.echo(f"smallest configurations that fit (keeping {report['headroom']:.0%} of each card's usable memory "
               "free):")
    for f in report["fits"]:
        hours = f" ~{f['est_hours']:.1f} h" if f.get("est_hours") else ""
        hours += " (uncalibrated: the GPU class's default speed)" if hours and not f["speed_calibrated"] else ""
        typer.echo(f"  {f['gpu_count']:>3} x {f['gpu']:<11} {f['scope']:<10} {f['per_gpu_gib']:>7.1f} / "
                   f"{f['usable_gib']:g} GiB  {f['sharding']}{hours}")

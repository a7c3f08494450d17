"""Training stacks (``model.stack``): the settings each one uses when a job does not say.

A user says which stack trains the model; the stack decides the loss implementation, activation
checkpointing, optimizer and adapter dtypes, torch.compile, offload and the fused kernels. Every
default below is read from the stack's own default configs or recipes (file, version and commit
in docs/sizing.md, "Training stacks"). An explicit knob in the ``model:`` block always wins.

Where a stack changed a default between releases, the default here is the one that needs more
memory (an estimate that is too small buys a card that runs out of memory; one too large costs a
little money): torchtitan's llama3 recipes wrap the loss in ``ChunkedLossWrapper`` only since
2026-06, so ``torchtitan`` keeps the plain cross-entropy of the releases its published runs used.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

STACKS = ("hf", "torchtune", "unsloth", "axolotl", "llama-factory", "torchtitan")
DEFAULT_STACK = "hf"
KNOBS = ("activation_checkpointing", "loss", "optimizer", "optimizer_state_dtype", "adapter_dtype",
         "master_weights", "compile", "offload", "optimizer_in_backward")  # fmt: skip
# torchtune ships a 70B full fine-tuning recipe with fsdp_cpu_offload (llama3_1/70B_full.yaml); its
# 8B distributed recipe does not offload. The recipe a user runs is the one for their model's size.
TORCHTUNE_OFFLOAD_PARAMS = 60e9


@dataclass(frozen=True)
class Knobs:
    """The settings a workload trains with, and which of them came from its stack."""

    activation_checkpointing: str
    loss: str
    optimizer: str
    optimizer_state_dtype: str
    adapter_dtype: str
    master_weights: bool
    compile: bool
    offload: tuple[str, ...]
    optimizer_in_backward: bool
    from_stack: tuple[str, ...]


def _hf(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # Transformers TrainingArguments: gradient_checkpointing False, optim adamw_torch (fp32 state),
    # torch_compile False, no Liger; the model's forward upcasts the logits (eager loss). PEFT:
    # adapters autocast to fp32; prepare_model_for_kbit_training(use_gradient_checkpointing=True) for
    # a 4-bit base, and it casts the unquantised modules to fp32.
    return {"activation_checkpointing": "full" if method == "qlora" else "none", "loss": "eager",
            "optimizer": "adamw", "optimizer_state_dtype": "fp32", "adapter_dtype": "fp32", "master_weights": True,
            "compile": False, "offload": (), "optimizer_in_backward": False}  # fmt: skip


def _torchtune(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # recipes/configs/llama3_1/*.yaml: dtype bf16 (bf16 weights, adapters and Adam state, no fp32
    # master), enable_activation_checkpointing True, activation offloading False, compile False,
    # chunked cross-entropy (CEWithChunkedOutputLoss, LinearCrossEntropyLoss since 2025-04). Full
    # fine-tuning on one device: bitsandbytes PagedAdamW8bit with optimizer_in_bwd; distributed:
    # AdamW (fused), and for 70B fsdp_cpu_offload (the 70B_full recipe).
    full_one = method == "full" and not multi_gpu
    offload = ("params", "optimizer") if method == "full" and multi_gpu and params >= TORCHTUNE_OFFLOAD_PARAMS else ()
    return {"activation_checkpointing": "full", "loss": "chunked",
            "optimizer": "paged-adamw-8bit" if full_one else "adamw", "optimizer_state_dtype": "bf16",
            "adapter_dtype": "bf16", "master_weights": False, "compile": False, "offload": offload,
            "optimizer_in_backward": full_one}  # fmt: skip


def _unsloth(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # unsloth/models/loader.py FastLanguageModel.from_pretrained: load_in_4bit True,
    # use_gradient_checkpointing "unsloth" (checkpoints offloaded to host memory); its fused
    # cross-entropy never materialises the logits; 16-bit adapters and embeddings; the notebooks'
    # optim "adamw_8bit".
    return {"activation_checkpointing": "full", "loss": "fused", "optimizer": "adamw-8bit",
            "optimizer_state_dtype": "fp32", "adapter_dtype": "bf16", "master_weights": True, "compile": False,
            "offload": ("activations",), "optimizer_in_backward": False}  # fmt: skip


def _axolotl(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # examples/llama-3/{lora-8b.yml, qlora.yml, fft-8b.yaml}: gradient_checkpointing true; optimizer
    # adamw_bnb_8bit (LoRA), paged_adamw_32bit (QLoRA), paged_adamw_8bit (full); bf16 auto; no
    # cut_cross_entropy / liger plugin, torch_compile unset; PEFT's fp32 adapters.
    opt = {"lora": "adamw-8bit", "qlora": "paged-adamw", "full": "paged-adamw-8bit"}.get(method, "adamw")
    return {"activation_checkpointing": "full", "loss": "eager", "optimizer": opt, "optimizer_state_dtype": "fp32",
            "adapter_dtype": "fp32", "master_weights": True, "compile": False, "offload": (),
            "optimizer_in_backward": False}  # fmt: skip


def _llama_factory(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # src/llamafactory/hparams/model_args.py: disable_gradient_checkpointing False (checkpointing on),
    # enable_liger_kernel False, use_unsloth False; finetuning_args pure_bf16 False, so adapter.py
    # casts the trainable parameters to fp32; the Trainer's adamw_torch.
    return {"activation_checkpointing": "full", "loss": "eager", "optimizer": "adamw", "optimizer_state_dtype": "fp32",
            "adapter_dtype": "fp32", "master_weights": True, "compile": False, "offload": (),
            "optimizer_in_backward": False}  # fmt: skip


def _torchtitan(method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    # torchtitan/models/llama3/config_registry.py: SelectiveAC for 8B, FullAC for 70B and 405B;
    # compile off; FSDP2 mixed precision (param bf16, reduce fp32) over fp32 sharded parameters;
    # AdamW fp32 state; plain cross-entropy (module docstring).
    return {"activation_checkpointing": "selective" if params < 30e9 else "full", "loss": "eager",
            "optimizer": "adamw", "optimizer_state_dtype": "fp32", "adapter_dtype": "fp32", "master_weights": True,
            "compile": False, "offload": (), "optimizer_in_backward": False}  # fmt: skip


_DEFAULTS = {"hf": _hf, "torchtune": _torchtune, "unsloth": _unsloth, "axolotl": _axolotl,
             "llama-factory": _llama_factory, "torchtitan": _torchtitan}  # fmt: skip
_INFERENCE = {"activation_checkpointing": "none", "loss": "eager", "optimizer": "adamw",
              "optimizer_state_dtype": "fp32", "adapter_dtype": "fp32", "master_weights": False, "compile": False,
              "offload": (), "optimizer_in_backward": False}  # fmt: skip


def stack_defaults(stack: str, method: str, multi_gpu: bool, params: float) -> dict[str, object]:
    """What ``stack`` uses for ``method`` on one GPU or several, for a model of ``params``."""
    if method == "inference":
        return dict(_INFERENCE)
    return _DEFAULTS[stack](method, multi_gpu, params)


@lru_cache(maxsize=4096)
def resolve(stack: str, method: str, multi_gpu: bool, params: float, explicit: tuple[object, ...]) -> Knobs:
    """The knobs in effect: each explicit value (``explicit``, in KNOBS order, None where unset),
    else the stack's default. ``from_stack`` names the ones the stack set (it says a stack other
    than hf set them, or hf did where hf's default is the only thing the user relied on)."""
    defaults = stack_defaults(stack, method, multi_gpu, params)
    values = {k: (v if v is not None else defaults[k]) for k, v in zip(KNOBS, explicit, strict=True)}
    if method != "full":
        values["master_weights"] = False
    if method == "inference":
        values.update(_INFERENCE)
    from_stack = tuple(k for k, v in zip(KNOBS, explicit, strict=True) if v is None and method != "inference"
                       and not (k == "master_weights" and method != "full"))  # fmt: skip
    return Knobs(**values, from_stack=from_stack)  # type: ignore[arg-type]


def conflict(stack: str, method: str, strategy: str | None, offload: tuple[str, ...] | None) -> str | None:
    """Why a ``model:`` block contradicts its stack (one line naming the field and the fix), or None.
    ``offload`` is the explicit value (None: unset). ``strategy``: the declared distributed strategy
    (None: not known yet, as inside a job spec before its top-level ``distributed:`` is read)."""
    off = offload or ()
    if method == "inference" and stack != DEFAULT_STACK:
        return (f"stack: {stack} is a training stack; inference is sized as vLLM serves it: remove stack, or use "
                "method full, lora or qlora")
    if stack == "torchtitan" and method == "qlora":
        return ("stack: torchtitan has no 4-bit (NF4) base for QLoRA; use method lora or full, or a stack with QLoRA "
                "(hf, torchtune, unsloth, axolotl, llama-factory)")
    if stack in ("torchtune", "torchtitan") and strategy in ("zero2", "zero3"):
        return (f"distributed: {stack} shards with FSDP, not DeepSpeed ZeRO; use distributed: {{strategy: fsdp}}, "
                "or a stack that runs DeepSpeed (hf, axolotl, llama-factory)")
    if stack == "unsloth" and strategy in ("fsdp", "zero2", "zero3", "tp"):
        return (f"distributed: unsloth trains on one GPU or data-parallel (ddp), not {strategy}; use strategy ddp or "
                "none, or a stack that shards (hf, axolotl, llama-factory, torchtune)")
    if stack == "unsloth" and "params" in off:
        return ("offload: unsloth does not offload parameters to host memory (it offloads activation checkpoints); "
                "remove params from offload, or use a stack with FSDP or ZeRO-3 offload (hf, axolotl, torchtune)")
    if stack in ("torchtune", "torchtitan") and "params" in off and strategy is not None and strategy != "fsdp":
        return (f"offload: params in {stack} is FSDP's CPU offload (fsdp_cpu_offload); declare distributed: "
                "{strategy: fsdp} over 2 or more GPUs, or remove params from offload")
    return None

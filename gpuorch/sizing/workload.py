"""What a job does with a model: the ``model:`` block of a job spec and the input of ``estimate``.

Validated with pydantic like the rest of the spec: unknown keys are rejected and every error
names the field and the fix. Combinations that do not exist in practice (full fine-tuning of
4-bit weights, QLoRA with an int8 compute dtype) are refused here, once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from gpuorch.sizing.shapes import PRESETS, ModelShape, parse_count, shape_for
from gpuorch.sizing.stacks import DEFAULT_STACK, STACKS, Knobs, conflict, resolve
from gpuorch.units import parse_duration_s

Method = Literal["full", "lora", "qlora", "inference"]
Precision = Literal["bf16", "fp16", "fp8", "int8", "int4"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd"]
Sharding = Literal["auto", "none", "zero2", "zero3", "fsdp"]
Checkpointing = Literal["none", "selective", "full"]
Loss = Literal["eager", "chunked", "fused"]
StateDtype = Literal["fp32", "bf16"]
KvDtype = Literal["auto", "bf16", "fp16", "fp8"]
Strategy = Literal["none", "ddp", "fsdp", "zero2", "zero3", "tp"]
OFFLOADS = ("activations", "optimizer", "params")
SHARDED = frozenset({"fsdp", "zero2", "zero3", "tp"})

LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
_TARGET_GROUPS = {
    "all-linear": LORA_MODULES, "all": LORA_MODULES, "attention": LORA_MODULES[:4], "mlp": LORA_MODULES[4:],
}  # fmt: skip

Params = Annotated[float, BeforeValidator(lambda v: parse_count(v, "params"))]
Tokens = Annotated[float, BeforeValidator(lambda v: parse_count(v, "tokens"))]
Seconds = Annotated[float, BeforeValidator(parse_duration_s)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Architecture(_Frozen):
    layers: int = Field(ge=1, le=100_000)  # upper bounds: gpuorch.bounds' rule (issue 31)
    hidden: int = Field(ge=1, le=10**7)
    heads: int = Field(ge=1, le=100_000)
    kv_heads: int | None = Field(default=None, ge=1, le=100_000)  # None: same as heads (no GQA)
    vocab: int = Field(default=32000, ge=1, le=10**9)
    intermediate: int | None = Field(default=None, ge=1, le=10**8)  # None: 8/3 * hidden (SwiGLU)
    tied_embeddings: bool = False

    @model_validator(mode="after")
    def _divisible(self) -> Architecture:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.kv_heads and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        return self

    def shape(self) -> ModelShape:
        inter = self.intermediate or round(self.hidden * 8 / 3 / 256) * 256
        return ModelShape(
            self.layers, self.hidden, self.heads, self.kv_heads or self.heads, self.vocab, inter, self.tied_embeddings
        )


class Distributed(_Frozen):
    """How a job uses several GPUs (the job spec's ``distributed:``): ``strategy`` and ``degree``.

    ``none`` (the default when a job does not say): one GPU, whatever the offer has. ``ddp``: one
    full replica per GPU. ``fsdp`` / ``zero2`` / ``zero3``: model states sharded over ``degree``
    GPUs (PyTorch FSDP, DeepSpeed ZeRO stage 2 / 3). ``tp``: tensor parallel over ``degree`` GPUs;
    for inference, an offer with more GPUs runs ``gpus // degree`` replicas (tensor x data
    parallel). ``degree`` None: every GPU of the offer.
    """

    strategy: Strategy = "none"
    degree: int | None = Field(default=None, ge=1, le=1024)

    @model_validator(mode="after")
    def _degree(self) -> Distributed:
        if self.strategy == "none" and self.degree not in (None, 1):
            raise ValueError("strategy none runs on one GPU; give a strategy (ddp, fsdp, zero2, zero3, tp) "
                             "for degree > 1")
        if self.strategy in SHARDED and self.degree == 1:
            raise ValueError(f"{self.strategy} with degree 1 (one GPU) shards nothing; use strategy none, "
                             "or a degree of 2 or more")
        return self

    def gpus_on(self, offer_gpus: int) -> int:
        """GPUs the job uses on an offer with ``offer_gpus`` GPUs (may exceed it: then it cannot run)."""
        if self.strategy == "none":
            return 1
        return self.degree or offer_gpus


class Workload(_Frozen):
    params: Params | None = Field(default=None, le=1e15)  # 7B, 70e9; optional when a preset or architecture is given
    preset: str | None = None
    architecture: Architecture | None = None
    stack: str = DEFAULT_STACK  # the training stack whose defaults fill every knob left unset (stacks.py)
    method: Method = "full"
    precision: Precision = "bf16"  # weights (inference, lora base) / compute dtype (training)
    optimizer: Optimizer | None = None  # None: the stack's
    seq_len: int = Field(default=2048, ge=1, le=10**9)
    micro_batch: int = Field(default=1, ge=1, le=10**6)  # sequences per GPU per step (inference: concurrent)
    gradient_checkpointing: bool | None = None  # older spelling: true = activation_checkpointing full
    activation_checkpointing: Checkpointing | None = None  # None: the stack's
    loss: Loss | None = None  # eager (HF Trainer, PEFT, torchtitan), chunked (torchtune), fused (Liger, CCE, Unsloth)
    master_weights: bool | None = None  # full: an fp32 master copy (mixed precision); None: yes
    optimizer_state_dtype: StateDtype | None = None  # Adam m, v (8-bit optimizers keep 1 byte each regardless)
    adapter_dtype: StateDtype | None = None  # LoRA adapters and their gradients (PEFT: fp32; torchtune: bf16)
    offload: tuple[str, ...] | None = None  # activations, optimizer, params; none: nothing; None: the stack's
    optimizer_in_backward: bool | None = None  # step each parameter as its gradient lands (torchtune optimizer_in_bwd)
    compile: bool | None = None  # torch.compile: fuses elementwise ops, fewer saved activations
    kv_cache_dtype: KvDtype = "auto"  # auto: fp8 for fp8 models, else 16-bit
    max_batched_tokens: int | None = Field(default=None, ge=1, le=10**9)  # inference: prefill chunk (vLLM default 8192)
    distributed: Distributed | None = None  # set from the job's top-level distributed:
    lora_rank: int = Field(default=16, ge=1, le=10**6)
    lora_targets: tuple[str, ...] = Field(default=("all-linear",), validate_default=True)
    sharding: Sharding = "auto"  # auto: none on one GPU, the least sharding that fits on several
    interconnect: Literal["any", "nvlink"] = "any"  # nvlink: refuse PCIe-only multi-GPU offers
    tokens: Tokens | None = Field(default=None, le=1e18)  # tokens to train on (or to generate, for inference)
    # override the runtime estimate (per the job, on any GPU); at most ten years
    duration: Seconds | None = Field(default=None, le=10 * 366 * 86400.0)
    efficiency: float | None = Field(default=None, gt=0, le=1)  # override the MFU default

    @field_validator("stack", mode="before")
    @classmethod
    def _stack(cls, v: Any) -> Any:
        key = v.strip().lower().replace("_", "-") if isinstance(v, str) else v
        key = {"transformers": "hf", "peft": "hf", "llamafactory": "llama-factory"}.get(key, key)
        if key not in STACKS:
            raise ValueError(f"unknown stack {v!r}; known: {', '.join(STACKS)}")
        return key

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str | None) -> str | None:
        if v is not None and v.lower() not in PRESETS:
            raise ValueError(f"unknown preset {v!r}; known: {', '.join(PRESETS)}")
        return v.lower() if v else v

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> Any:
        items = [s.strip() for s in v.split(",")] if isinstance(v, str) else list(v)
        out: list[str] = []
        for item in items:
            key = item.lower().removesuffix("_proj")
            found = _TARGET_GROUPS.get(key) or ((key,) if key in LORA_MODULES else None)
            if not found:
                raise ValueError(
                    f"unknown LoRA target {item!r}; use {', '.join(LORA_MODULES)}, attention, mlp or all-linear"
                )
            out += [t for t in found if t not in out]
        if not out:
            raise ValueError("give at least one LoRA target module")
        return tuple(out)

    @field_validator("offload", mode="before")
    @classmethod
    def _offload(cls, v: Any) -> Any:
        if v is None:
            return None
        items = [x.strip() for x in v.split(",")] if isinstance(v, str) else list(v)
        items = [x for x in items if x and x != "none"]
        for x in items:
            if x not in OFFLOADS:
                raise ValueError(f"unknown offload {x!r}; use none or a list of {', '.join(OFFLOADS)}")
        return tuple(dict.fromkeys(items))

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.params is None and self.preset is None and self.architecture is None:
            raise ValueError("give params (like 8B), a preset or an architecture")
        if self.method == "full" and self.precision in ("int8", "int4"):
            raise ValueError("full fine-tuning trains 16-bit weights; use precision bf16, fp16 or fp8, or method qlora")
        if self.method == "qlora" and self.precision not in ("bf16", "fp16"):
            raise ValueError("qlora loads the base in 4-bit NF4; precision is its compute dtype: use bf16 or fp16")
        if self.method == "lora" and self.precision == "int4":
            raise ValueError("a 4-bit base is QLoRA; use method qlora")
        if self.method == "inference":
            if self.offload:
                raise ValueError("offload moves training state to host memory; inference has none: remove offload")
            if self.loss is not None:
                raise ValueError("loss: inference computes no loss; remove loss, or use method full, lora or qlora")
            if self.activation_checkpointing not in (None, "none") or self.gradient_checkpointing:
                raise ValueError("activation_checkpointing: inference keeps no activations for a backward pass; "
                                 "remove it")
            if self.distributed and self.distributed.strategy in ("ddp", "fsdp", "zero2", "zero3"):
                raise ValueError(f"distributed: {self.distributed.strategy} shards training state; inference "
                                 "spreads over GPUs with strategy tp (or none: one GPU)")
        elif self.max_batched_tokens is not None:
            raise ValueError("max_batched_tokens is the inference prefill chunk; remove it for training "
                             "(seq_len and micro_batch size training)")
        if self.master_weights is not None and self.method != "full":
            raise ValueError("master_weights: only full fine-tuning keeps a master copy; remove it for "
                             f"method {self.method}")
        if (self.gradient_checkpointing is not None and self.activation_checkpointing is not None
                and self.gradient_checkpointing != (self.activation_checkpointing != "none")):
            raise ValueError("gradient_checkpointing and activation_checkpointing disagree; give only "
                             "activation_checkpointing: none, selective or full")
        why = conflict(self.stack, self.method, self.distributed.strategy if self.distributed else None, self.offload)
        if why:
            raise ValueError(why)
        ctx = PRESETS[self.preset].max_context if self.preset and self.architecture is None else None
        if ctx and self.seq_len > ctx:
            raise ValueError(f"seq_len {self.seq_len} is longer than {self.preset}'s maximum context {ctx}; "
                             f"use seq_len <= {ctx} or a long-context preset (llama-3.1-8b, llama-3.1-70b)")
        return self

    @property
    def shape(self) -> ModelShape:
        return _shape(self.params, self.preset, self.architecture)

    @property
    def n_params(self) -> float:
        """The stated count wins over the count implied by the shape (a preset is approximate)."""
        return self.params if self.params is not None else float(self.shape.param_count())

    @property
    def training(self) -> bool:
        return self.method != "inference"

    @property
    def knobs(self) -> Knobs:
        """Every training setting in effect: the explicit ones, else the stack's (stacks.py)."""
        ac = self.activation_checkpointing
        if ac is None and self.gradient_checkpointing is not None:
            ac = "full" if self.gradient_checkpointing else "none"
        explicit = (ac, self.loss, self.optimizer, self.optimizer_state_dtype, self.adapter_dtype,
                    self.master_weights, self.compile, self.offload, self.optimizer_in_backward)  # fmt: skip
        multi = self.strategy.strategy != "none"
        return resolve(self.stack, self.method, multi, self.n_params, explicit)

    def check_stack(self, strategy: str) -> str | None:
        """Why this workload contradicts its stack under the job's declared ``strategy``, or None."""
        return conflict(self.stack, self.method, strategy, self.offload)

    @property
    def ac_mode(self) -> str:
        """Activation checkpointing: none, selective or full (explicit, else the stack's)."""
        return self.knobs.activation_checkpointing if self.training else "none"

    @property
    def checkpointing(self) -> bool:
        return self.ac_mode != "none"

    @property
    def loss_mode(self) -> str:
        return self.knobs.loss

    @property
    def uses_master(self) -> bool:
        return self.method == "full" and self.knobs.master_weights

    @property
    def kv_bytes(self) -> float:
        if self.kv_cache_dtype == "auto":
            return 1.0 if self.precision == "fp8" else 2.0
        return 1.0 if self.kv_cache_dtype == "fp8" else 2.0

    @property
    def strategy(self) -> Distributed:
        """The declared strategy; a job that declares none runs on one GPU. An explicit
        ``sharding`` (zero2, zero3, fsdp) declares that strategy over every GPU of the offer."""
        if self.distributed is not None:
            return self.distributed
        if self.sharding in ("zero2", "zero3", "fsdp"):
            return Distributed(strategy=self.sharding)
        return Distributed()

    @property
    def compute_precision(self) -> str:
        """The dtype the matmuls run in: weight-only int8/int4 kernels dequantise to fp16."""
        return "fp16" if self.precision in ("int8", "int4") else self.precision

    @property
    def trainable_params(self) -> float:
        """LoRA: r * (d_in + d_out) per targeted projection per layer (Hu et al. 2021)."""
        if self.method == "full":
            return self.n_params
        if self.method == "inference":
            return 0.0
        return _lora_params(self.shape, self.lora_rank, self.lora_targets)


# Placement asks for these once per offer class: memoise them on the (hashable) inputs.
@lru_cache(maxsize=1024)
def _shape(params: float | None, preset: str | None, architecture: Architecture | None) -> ModelShape:
    if architecture is not None:
        return architecture.shape()
    if preset is not None:
        return PRESETS[preset]
    assert params is not None
    return shape_for(params)


@lru_cache(maxsize=1024)
def _lora_params(shape: ModelShape, rank: int, targets: tuple[str, ...]) -> float:
    dims = shape.linear_dims()
    return float(shape.layers * sum(rank * (dims[t][0] + dims[t][1]) for t in targets))

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
from gpuorch.units import parse_duration_s

Method = Literal["full", "lora", "qlora", "inference"]
Precision = Literal["bf16", "fp16", "fp8", "int8", "int4"]
Optimizer = Literal["adamw", "adamw-8bit", "sgd"]
Sharding = Literal["auto", "none", "zero2", "zero3", "fsdp"]

LORA_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
_TARGET_GROUPS = {
    "all-linear": LORA_MODULES, "all": LORA_MODULES, "attention": LORA_MODULES[:4], "mlp": LORA_MODULES[4:],
}  # fmt: skip

Params = Annotated[float, BeforeValidator(lambda v: parse_count(v, "params"))]
Tokens = Annotated[float, BeforeValidator(lambda v: parse_count(v, "tokens"))]
Seconds = Annotated[float, BeforeValidator(parse_duration_s)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Architecture(_Frozen):
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(default=None, ge=1)  # None: same as heads (no GQA)
    vocab: int = Field(default=32000, ge=1)
    intermediate: int | None = Field(default=None, ge=1)  # None: 8/3 * hidden (SwiGLU)
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


class Workload(_Frozen):
    params: Params | None = None  # 7B, 70e9; optional when a preset or architecture is given
    preset: str | None = None
    architecture: Architecture | None = None
    method: Method = "full"
    precision: Precision = "bf16"  # weights (inference, lora base) / compute dtype (training)
    optimizer: Optimizer = "adamw"
    seq_len: int = Field(default=2048, ge=1)
    micro_batch: int = Field(default=1, ge=1)  # sequences per GPU per step (inference: concurrent)
    gradient_checkpointing: bool | None = None  # None: on for lora/qlora, off for full
    lora_rank: int = Field(default=16, ge=1)
    lora_targets: tuple[str, ...] = Field(default=("all-linear",), validate_default=True)
    sharding: Sharding = "auto"  # auto: none on one GPU, the least sharding that fits on several
    interconnect: Literal["any", "nvlink"] = "any"  # nvlink: refuse PCIe-only multi-GPU offers
    tokens: Tokens | None = None  # tokens to train on (or to generate, for inference)
    duration: Seconds | None = None  # override the runtime estimate (per the job, on any GPU)
    efficiency: float | None = Field(default=None, gt=0, le=1)  # override the MFU default

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
    def checkpointing(self) -> bool:
        if self.gradient_checkpointing is not None:
            return self.gradient_checkpointing and self.training
        return self.method in ("lora", "qlora")

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

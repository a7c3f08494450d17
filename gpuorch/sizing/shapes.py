"""Transformer shapes: presets for common models, and a shape guessed from a parameter count.

Memory for activations, KV cache and LoRA adapters depends on the architecture, not just on
the parameter count. A user may give the architecture, name a preset, or give only the
parameter count: then the nearest preset within 15% is used, else a generic decoder
(docs/sizing.md, "Model shapes").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt])?\s*$", re.IGNORECASE)
_SCALE = {None: 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_count(value: str | int | float, what: str = "count") -> float:
    """``7B``, ``70e9``, ``350M``, ``1.5T``, ``8000000`` -> a number. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"cannot read {what} {value!r}; write it like 7B, 70e9 or 350M")
    if isinstance(value, int | float):
        number = float(value)
    else:
        m = _COUNT.match(str(value))
        if not m:
            raise ValueError(f"cannot read {what} {value!r}; write it like 7B, 70e9 or 350M")
        number = float(m.group(1)) * _SCALE[m.group(2).lower() if m.group(2) else None]
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return number


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer (Llama family layout: GQA attention, SwiGLU MLP)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    intermediate: int
    tied_embeddings: bool = False
    name: str = "custom"
    max_context: int | None = None  # the model's trained context (config.json max_position_embeddings)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def embedding_params(self) -> int:
        """Input embedding plus the LM head (unless tied); kept in 16-bit by quantisers."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def layer_params(self) -> int:
        """q,o: h*h each; k,v: h*kv_dim each; gate, up, down: h*i each (norms ignored)."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim + 3 * self.hidden * self.intermediate

    def param_count(self) -> int:
        return self.layers * self.layer_params + self.embedding_params

    def linear_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection in one block, by LoRA target name."""
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        return {"q": (h, h), "k": (h, kv), "v": (h, kv), "o": (h, h), "gate": (h, i), "up": (h, i), "down": (i, h)}


# Values from each model's published config.json on the Hugging Face Hub (max_context is its
# max_position_embeddings). Llama 3.1 has Llama 3's shape with a 128k context.
PRESETS: dict[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape(32, 4096, 32, 32, 32000, 11008, name="llama-2-7b", max_context=4096),
        ModelShape(32, 4096, 32, 8, 32000, 14336, name="mistral-7b", max_context=32768),
        ModelShape(32, 4096, 32, 8, 128256, 14336, name="llama-3-8b", max_context=8192),
        ModelShape(32, 4096, 32, 8, 128256, 14336, name="llama-3.1-8b", max_context=131072),
        ModelShape(40, 5120, 40, 40, 32000, 13824, name="llama-2-13b", max_context=4096),
        ModelShape(80, 8192, 64, 8, 32000, 28672, name="llama-2-70b", max_context=4096),
        ModelShape(80, 8192, 64, 8, 128256, 28672, name="llama-3-70b", max_context=8192),
        ModelShape(80, 8192, 64, 8, 128256, 28672, name="llama-3.1-70b", max_context=131072),
        ModelShape(126, 16384, 128, 8, 128256, 53248, name="llama-3.1-405b", max_context=131072),
    )
}
PRESET_TOLERANCE = 0.15


def generic_shape(params: float) -> ModelShape:
    """A plain decoder with N ~= 12*L*h^2 and the common aspect L = h/128 (docs/sizing.md)."""
    hidden = max(256, round((params * 128 / 12) ** (1 / 3) / 128) * 128)
    heads = hidden // 128
    intermediate = round(hidden * 8 / 3 / 256) * 256
    return ModelShape(max(1, hidden // 128), hidden, heads, heads, 32000, intermediate, name="generic")


def nearest_preset(params: float) -> ModelShape | None:
    best = min(PRESETS.values(), key=lambda s: abs(math.log(s.param_count() / params)))
    return best if abs(best.param_count() / params - 1) <= PRESET_TOLERANCE else None


def shape_for(params: float) -> ModelShape:
    return nearest_preset(params) or generic_shape(params)

"""``resources.gpu`` of a job spec: the ``NAME[:MEMORY][:COUNT]`` grammar (exact counts, ranges,
families narrowed by memory) and the frozen, strict base every spec model shares."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuorch import gpus
from gpuorch.jobs import validate as v_
from gpuorch.units import parse_size_gib


class Strict(BaseModel):
    # allow_inf_nan: NaN and infinities would be stored as JSON null, which the daemon cannot load
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class GpuRequirement(Strict):
    """``resources.gpu``: ``NAME[:MEMORY][:COUNT]`` (README, "Job spec reference").

    - NAME: a family (``A100``: every memory variant, 40 GB and 80 GB, SXM and PCIe) or one
      variant (``A100-80GB``, ``H100-NVL``); leave it out for any model (``24GB+``).
    - MEMORY: a per-GPU floor (``80GB``, ``80GB+``); with a family name it narrows the variants.
    - COUNT: ``1`` means exactly one; ``1..8`` and ``2+`` mean at least (and at most), as dstack's
      spec does. Without a count: exactly one.

    ``count`` is the least number of GPUs; ``at_least`` says whether more are welcome, up to
    ``max_count`` (None: no upper bound). ``variant`` is set when NAME names one variant.
    """

    name: str | None = None  # canonical name from gpus.GPUS (a family's or a variant's); None: any model
    min_memory_gib: float | None = Field(default=None, gt=0, le=v_.MAX_GIB)
    count: int = Field(default=1, ge=1, le=v_.MAX_GPUS)
    at_least: bool = False
    max_count: int | None = Field(default=None, ge=1, le=v_.MAX_GPUS)
    variant: bool = False

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        """The mapping form (``gpu: {name: A100-80GB, count: 2}``, and a stored spec read back)
        names its GPU as the text form does: a family name is the family, anything else one
        variant; a spec stored before ``variant`` existed reads its name that way too."""
        if isinstance(data, dict) and data.get("name"):
            written = str(data["name"])
            spec = gpus.lookup(written)
            if spec is None:
                return data  # the name's own validator refuses it, naming resources.gpu.name
            family = gpus.is_family_name(written) and not data.get("variant", False)
            data = {**data, "name": spec.model if family else spec.name, "variant": not family}
        return data

    @model_validator(mode="after")
    def _range(self) -> GpuRequirement:
        if self.max_count is not None and self.max_count < self.count:
            raise ValueError(f"max_count {self.max_count} is below count {self.count}; "
                             f"write {self.max_count}..{self.count}")
        return self

    @field_validator("name")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and gpus.lookup(str(v)) is None:
            raise ValueError(f"unknown GPU {v!r}; known: {', '.join(gpus.known_names())}")
        return v

    @classmethod
    def parse(cls, text: str) -> GpuRequirement:
        parts = [p.strip() for p in str(text).split(":") if p.strip()]
        if not parts or len(parts) > 3:
            raise ValueError(f"cannot read gpu {text!r}; write NAME[:MEMORY][:COUNT] like A100:80GB:1, A100:1..8 "
                             "or 24GB+")
        name: str | None = None
        variant = False
        memory: float | None = None
        count, at_least, most = 1, False, None
        counts = memories = 0
        for i, part in enumerate(parts):
            if i > 0 and re.fullmatch(r"\d+(\.\.\d+|\+)?", part):
                (count, at_least, most), counts = _count(part, text), counts + 1
            elif part.endswith("+") or re.fullmatch(r"[0-9.]+\s*(GB|GiB|G)", part, re.IGNORECASE):
                memory, memories = parse_size_gib(part.rstrip("+")), memories + 1
            elif i == 0:
                spec = gpus.lookup(part)
                if spec is None:
                    raise ValueError(f"unknown GPU {part!r}; known: {', '.join(gpus.known_names())}")
                name, variant = spec.name, not gpus.is_family_name(part)
                if not variant:
                    name = spec.model
            else:
                raise ValueError(f"cannot read {part!r} in gpu {text!r}; write NAME[:MEMORY][:COUNT]")
        if counts > 1 or memories > 1:  # "A100:2:3": which count was meant?
            raise ValueError(f"gpu {text!r} gives the {'count' if counts > 1 else 'memory'} twice; "
                             "write NAME[:MEMORY][:COUNT] like A100:80GB:2")
        if max(count, most or 0) > v_.MAX_GPUS:
            raise ValueError(f"gpu {text!r}: the GPU count must be 1 to {v_.MAX_GPUS}")
        return cls(name=name, min_memory_gib=memory, count=count, at_least=at_least, max_count=most,
                   variant=variant)

    def matches(self, gpu: str | None) -> bool:
        """Whether an offer's GPU (a canonical name) is the model asked for, memory aside: a
        family name matches each of its variants, a variant name only itself."""
        if self.name is None:
            return gpu is not None
        spec = gpus.lookup(gpu or "")
        if spec is None:
            return False
        return spec.name == self.name if self.variant else spec.model == self.name

    def allows(self, n: int, allow_larger: bool = False) -> bool:
        """Whether an instance with ``n`` GPUs is one the job may run on: exactly ``count``, or
        with a range (or ``allow_larger``) at least ``count`` (and at most ``max_count``)."""
        if n < self.count:
            return False
        if allow_larger:
            return True
        if not self.at_least:
            return n == self.count
        return self.max_count is None or n <= self.max_count

    def uses(self, n: int) -> int:
        """GPUs the job uses on an instance with ``n``: all of them within its range, else its count."""
        if not self.at_least:
            return self.count
        return n if self.max_count is None else min(n, self.max_count)

    def memory_floor_gib(self) -> float:
        if self.min_memory_gib is not None:
            return self.min_memory_gib
        spec = gpus.lookup(self.name) if self.name and self.variant else None
        return spec.memory_gib if spec else 0.0

    @property
    def count_text(self) -> str:
        if not self.at_least:
            return str(self.count)
        return f"{self.count}+" if self.max_count is None else f"{self.count}..{self.max_count}"

    def __str__(self) -> str:
        memory = f"{self.min_memory_gib:g}GB+" if self.min_memory_gib is not None else None
        return ":".join(p for p in (self.name, memory, self.count_text) if p)


def _count(part: str, text: str) -> tuple[int, bool, int | None]:
    """A count as written: ``1`` (exactly), ``2+`` (at least), ``1..8`` (between)."""
    if part.endswith("+"):
        low, high, ranged = int(part[:-1]), None, True
    elif ".." in part:
        a, b = part.split("..")
        low, high, ranged = int(a), int(b), True
    else:
        low, high, ranged = int(part), None, False
    if low < 1:
        raise ValueError(f"gpu {text!r}: the GPU count must be at least 1; write 1 (or leave the count out for one)")
    if high is not None and high < low:
        raise ValueError(f"gpu {text!r}: the range {part} has its minimum above its maximum; write {high}..{low}")
    return low, ranged, high

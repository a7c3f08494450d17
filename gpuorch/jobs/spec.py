"""The job spec: what a user submits (YAML), validated with pydantic; unknown keys rejected.

``load_spec`` turns every validation failure into one ``UserInputError`` line that names the
field and the fix, so the CLI can print it and exit 2 without writing anything.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from gpuorch.bounds import Integer, Number, Usd, describe_bound, fix_hint
from gpuorch.errors import UserInputError, field_path
from gpuorch.jobs import validate as v_
from gpuorch.jobs.gpu_request import GpuRequirement, Strict
from gpuorch.jobs.lifetime import Lifetime, Seconds, duration_text  # Lifetime: kind, max_duration, idle_stop
from gpuorch.jobs.volume_spec import Gib, VolumeRequest  # re-exported: VolumeRequest lived here
from gpuorch.notify.kinds import NotifySpec
from gpuorch.policy.recovery import get_strategy
from gpuorch.sizing.workload import SHARDED, Distributed, Workload
from gpuorch.units import parse_duration_s

if TYPE_CHECKING:
    from gpuorch.checkpoint.url import StoreUrl

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class SpotPolicy(StrEnum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"
    AUTO = "auto"


class Resources(Strict):
    gpu: GpuRequirement | None = None
    allow_larger: bool = False  # may run on an instance with more GPUs than resources.gpu asks for
    cpus: Number = Field(default=1, ge=0, le=v_.MAX_CPUS)
    memory: Gib = Field(default=0.0, le=v_.MAX_GIB)
    disk: Gib = Field(default=50.0, le=v_.MAX_GIB)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v: Any) -> Any:
        if v is None or isinstance(v, GpuRequirement | dict):
            return v
        return GpuRequirement.parse(str(v))


class Checkpoint(Strict):
    # on the instance, under the job's run dir (the agent writes nowhere else)
    dir: Annotated[str, BeforeValidator(v_.relative_dir)] = "checkpoints"
    store: str  # file:///path, s3://bucket/prefix, gs://bucket/prefix, az://container@account/prefix
    interval: Seconds = Field(default=60.0, le=v_.MAX_SECONDS)  # how often the agent syncs complete checkpoints
    signal: str = "SIGUSR1"  # sent to the job when a preemption notice arrives
    keep: Integer = Field(default=3, ge=1, le=v_.MAX_COUNT)  # complete checkpoints kept in the store

    @field_validator("store")
    @classmethod
    def _store(cls, v: str) -> str:
        """A scheme some installed store registers (``gpuorch.stores``); its shape is the store's
        to check, when the agent opens it."""
        from gpuorch.checkpoint.store import STORE_PLUGINS, unsupported
        from gpuorch.checkpoint.url import StoreUrl

        try:
            scheme = StoreUrl.parse(v).scheme
        except ValueError:
            scheme = ""
        if scheme not in STORE_PLUGINS.table:  # registered, shipped or not (fit_check says which)
            raise ValueError(unsupported(scheme, v))
        return v_.store_url(v)  # a bucket or a directory to write to

    @property
    def url(self) -> StoreUrl:
        """``store``, parsed."""
        from gpuorch.checkpoint.url import StoreUrl

        return StoreUrl.parse(self.store)

    @field_validator("signal")
    @classmethod
    def _signal(cls, v: str) -> str:
        return v_.signal_name(v)


class Retry(Strict):
    max_preemptions: Integer = Field(default=20, ge=0, le=v_.MAX_COUNT)  # relaunches after preemption
    max_failures: Integer = Field(default=0, ge=0, le=v_.MAX_COUNT)  # relaunches after the job exits non-zero


class Recovery(Strict):
    """Where the job goes after a preemption: a strategy registered in ``gpuorch.policy.recovery``."""

    strategy: str | None = None  # None: the daemon's recovery_strategy

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                get_strategy(v)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
        return v


class Budget(Strict):
    """A hard cap on what the job (or a sweep) may spend, all attempts together (docs/money.md)."""

    max_cost: Usd  # USD


def _instant(v: Any) -> str:
    """A deadline as written: a duration from submission (``8h``) or an ISO-8601 time (UTC unless
    an offset is given). YAML turns some times into datetimes and dates: they come back as text."""
    if isinstance(v, datetime):
        return (v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)).isoformat()
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise ValueError("write a time like 2026-11-28T08:00 (UTC) or a duration from submission like 8h")
    text = str(v).strip()
    from gpuorch.when import parse_instant

    try:
        when = parse_instant(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (ValueError, OverflowError) as e:
        raise ValueError(f"cannot read {text!r} ({e}); write a time like 2026-11-28T08:00 or a duration like 8h") \
            from None
    is_duration = "-" not in text and ":" not in text  # "8h", not "2030-01-01T00:00Z" (its Z is a letter too)
    if is_duration and (when - datetime(2000, 1, 1, tzinfo=UTC)).total_seconds() > v_.MAX_SECONDS:
        raise ValueError(f"{text!r} is more than ten years away; give a nearer deadline")
    return text


class Deadline(Strict):
    """``deadline: 8h`` or ``deadline: {at: 2026-11-28T08:00, job_hours: 6}`` (docs/policy.md).

    The daemon chooses spot, on-demand or waiting at every decision point so that the job is done
    by ``at``. It needs to know how much work the job is: ``job_hours`` (hours of running time, on
    the GPU it gets), else the planner's estimate from ``model`` (``tokens`` or ``duration``).
    """

    at: Annotated[str, BeforeValidator(_instant)]  # ISO-8601 time, or a duration from submission
    job_hours: Number | None = Field(default=None, gt=0, le=v_.MAX_HOURS)  # work; default: the planner's estimate
    startup: Seconds | None = Field(default=None, le=v_.MAX_SECONDS)  # per launch (boot, setup, restore)

    def resolve(self, submitted: datetime) -> datetime:
        """The deadline as an aware UTC time; a duration counts from ``submitted``."""
        from gpuorch.when import parse_instant

        return parse_instant(self.at, submitted)


class JobSpec(Lifetime):
    name: str
    run: Annotated[str, BeforeValidator(v_.nonempty_command)]
    setup: Annotated[str, BeforeValidator(v_.text)] | None = None
    workdir: Annotated[str, BeforeValidator(v_.text)] | None = None  # a local directory uploaded as the run dir
    env: dict[v_.EnvName, v_.EnvValue] = Field(default_factory=dict, max_length=v_.MAX_ENV)
    resources: Resources = Field(default_factory=Resources)
    spot_policy: SpotPolicy = SpotPolicy.AUTO
    # robust: rank a zone's spot price far below its region's others at their median (docs/catalog.md)
    spot_price: Literal["robust", "listed"] = "robust"
    max_price_per_hour: Usd | None = None
    providers: v_.NameList | None = None  # restrict placement to these providers
    regions: v_.NameList | None = None  # restrict placement to these regions
    checkpoint: Checkpoint | None = None
    retry: Retry = Field(default_factory=Retry)
    recovery: Recovery | None = None
    model: Workload | None = None  # what the job does with a model: placement sizes the GPU from it
    # How the job uses several GPUs (strategy, degree); undeclared: one GPU, and a multi-GPU offer is
    # only a place to run it. The job's environment gets GPUORCH_DISTRIBUTED and _DEGREE.
    distributed: Distributed | None = None
    budget: Budget | None = None
    volume: VolumeRequest | None = None
    deadline: Deadline | None = None  # finish by then at the least cost (docs/policy.md)
    image: str | None = None  # setup and run execute in this container image (docs/workloads.md)
    nodes: Integer = Field(default=1, ge=1, le=v_.MAX_NODES)  # instances the job spans (docs/workloads.md, multi-node)
    # An instance whose attempt ended stays up, idle and billed, this long for the next job that fits
    # it (docs/money.md, "Warm capacity"); 0: terminated at once. A sweep's trials default to 3m.
    keep_warm: Seconds = Field(default=0.0, ge=0, le=24 * 3600)
    # how long a job may wait for full owned capacity before it bursts to a cloud (docs/ssh-pools.md)
    max_wait: Seconds | None = Field(default=None, gt=0, le=v_.MAX_SECONDS)
    notify: NotifySpec | None = None  # routes added, events silenced (docs/notifications.md)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        from gpuorch.agent.container import parse_image  # stdlib only
        if v is not None:
            parse_image(v)
            return v.strip()
        return v

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, v: Any) -> Any:
        return v if v is None or isinstance(v, dict | Deadline) else {"at": v}

    @model_validator(mode="after")
    def _deadline_work(self) -> JobSpec:
        d = self.deadline
        if self.max_wait is not None and d is None:  # a wait for owned capacity keeps to a deadline
            raise ValueError("max_wait: waiting for owned capacity needs a deadline to keep; add deadline "
                             "(like deadline: {at: 8h, job_hours: 2}), or remove max_wait")
        if d is not None and d.job_hours is None and (
                self.model is None or (self.model.tokens is None and self.model.duration is None)):
            raise ValueError("deadline.job_hours: required to plan for a deadline (how many hours the job runs); "
                             "add it, or give model.tokens or model.duration")
        return self

    @model_validator(mode="after")
    def _distributed(self) -> JobSpec:
        d, m = self.distributed, self.model
        if m is not None and m.distributed is not None:
            if d is not None and d != m.distributed and m.distributed != Distributed():
                raise ValueError("distributed: given twice, differently (top level and model.distributed); keep the "
                                 "top-level one")
            d = d or (m.distributed if m.distributed != Distributed() else None)  # a stored spec: model's copy
        if d is None and m is not None and m.sharding in ("zero2", "zero3", "fsdp"):
            d = Distributed(strategy=m.sharding)  # model.sharding, the older spelling, declares it too
        gpu = self.resources.gpu
        if d is not None and gpu is not None:
            most = gpu.max_count if gpu.at_least else gpu.count  # None: no upper bound
            if d.strategy in SHARDED and most == 1:
                raise ValueError(f"distributed: {d.strategy} with one GPU (resources.gpu: {gpu}) shards nothing; "
                                 "ask for several GPUs in resources.gpu, or use strategy none")
            if d.degree and most is not None and d.degree > most:
                raise ValueError(f"distributed.degree: {d.degree} GPUs, but resources.gpu asks for "
                                 f"{gpu.count_text}; make them agree")
        if m is not None and d is not None and m.method == "inference" and d.strategy in ("ddp", "fsdp", "zero2",
                                                                                           "zero3"):
            raise ValueError(f"distributed: {d.strategy} shards training state; inference spreads over GPUs with "
                             "strategy tp (or none: one GPU)")
        if m is not None:  # the model is sized for exactly what the job declares (none: one GPU)
            why = m.check_stack((d or Distributed()).strategy)  # model.stack against the declared strategy
            if why:
                raise ValueError(why if why.startswith("distributed") else f"model.{why}")
            return self.model_copy(update={"distributed": d, "model": m.model_copy(
                update={"distributed": d or Distributed()})})
        return self if d is self.distributed else self.model_copy(update={"distributed": d})

    @model_validator(mode="after")
    def _distributed_nodes(self) -> JobSpec:
        """A gang (``nodes`` > 1) trains across instances: a declared ``distributed: none`` (one
        GPU in all) contradicts it. An undeclared strategy is left to the job's own launcher."""
        d = self.distributed
        if self.nodes > 1 and d is not None and d.strategy == "none":
            raise ValueError(f"distributed: strategy none runs on one GPU, but nodes: {self.nodes} asks for "
                             f"{self.nodes} instances; declare the strategy that spans them (ddp, fsdp, zero2, zero3) "
                             "or use nodes: 1")
        return self

    @property
    def strategy(self) -> Distributed:
        return self.distributed or Distributed()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):  # match() would let a trailing newline through ($)
            raise ValueError("use 1-63 lowercase letters, digits and dashes, starting with a letter or digit")
        return v


def _format_error(err: ErrorDetails, source: str, root: type[BaseModel] | None = None) -> str:
    """One line naming the field of ``root`` (the model validated: the job spec's unless named) and the fix."""
    path = err["loc"][:-2] if err["loc"][-1:] == ("[key]",) else err["loc"]  # a bad key: its message names it
    loc = field_path(path) or "(top level)"
    if not err["loc"] and str(err["msg"]).startswith("Value error, "):  # a model-level check names its field
        return f"{source}: {str(err['msg']).removeprefix('Value error, ')}"
    shown = duration_text if _is_duration(root or JobSpec, path) else describe_bound  # 24h, not 86400
    msg = fix_hint(err, shown) or str(err["msg"]).removeprefix("Value error, ")
    return f"{source}: {loc}: {msg}"


def _is_duration(model: type[BaseModel], loc: tuple[int | str, ...]) -> bool:
    """Whether ``loc`` names a duration field of ``model`` (``Seconds``: its bounds are seconds)."""
    meta: list[Any] = []
    inner: type[BaseModel] | None = model
    for key in loc:
        field = inner.model_fields.get(key) if inner is not None and isinstance(key, str) else None
        if field is None:
            return False
        members = get_args(field.annotation) or (field.annotation,)  # X | None: its members
        meta = [*field.metadata, *(m for t in members for m in getattr(t, "__metadata__", ()))]
        inner = next((t for t in members if isinstance(t, type) and issubclass(t, BaseModel)), None)
    return any(getattr(m, "func", None) is parse_duration_s for m in meta)


def parse_spec(data: Any, source: str = "job spec") -> JobSpec:
    """Validate ``data`` (parsed YAML or JSON) as the daemon will read it: the spec is dumped and
    loaded back (``model_validate_json``, the daemon's load) and must come back equal, so nothing
    is stored that the daemon cannot read or would read differently."""
    if not isinstance(data, dict):
        raise UserInputError(f"{source}: expected a mapping of keys like name, run, resources")
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as e:
        raise UserInputError(_format_error(e.errors()[0], source)) from None
    except RecursionError:
        raise UserInputError(f"{source}: nested too deeply; flatten it") from None
    return round_trip(spec, source)


def round_trip(spec: JobSpec, source: str = "job spec") -> JobSpec:
    """``spec`` if it loads back from its stored form exactly; else UserInputError."""
    try:
        again = JobSpec.model_validate_json(spec.model_dump_json())
    except ValidationError as e:
        raise UserInputError(f"{_format_error(e.errors()[0], source)} (as stored; write the value out plainly)") \
            from None
    if again != spec:
        changed = next((k for k in JobSpec.model_fields if getattr(again, k) != getattr(spec, k)), "(top level)")
        raise UserInputError(f"{source}: {changed}: would not be stored as written; write the value out plainly")
    return spec


def load_stored(text: str) -> JobSpec:
    """A stored spec (``jobs.spec``) as the daemon keeps it for each job across passes:
    ``model_validate_json(text)``, equal in every value and fields-set, in about 40 % of the
    memory. A stored spec lists every field (``parse_spec`` stores ``model_dump_json()``), and
    pydantic keeps, per model, a set of the fields given: here every field, so one shared set per
    model class does for all of them (7.2 -> 2.8 KB a job, for a seventh more time than the parse
    alone; docs/benchmarks.md). Raises pydantic's ValidationError (a ValueError) if the text
    cannot be read."""
    spec = JobSpec.model_validate_json(text)
    _share_fields_sets(spec)
    return spec


_EVERY_FIELD: dict[type[BaseModel], set[str]] = {}


def _share_fields_sets(m: BaseModel) -> None:
    """Give ``m``, and every model in it, whose fields-set names every field of its class, the
    class's one such set instead. Pydantic only adds field names to it (an assignment; these
    models are frozen), and adding one already there changes nothing, so sharing it is safe."""
    for v in m.__dict__.values():
        if isinstance(v, BaseModel):
            _share_fields_sets(v)
        elif isinstance(v, list | tuple):
            for x in v:
                if isinstance(x, BaseModel):
                    _share_fields_sets(x)
    every = _EVERY_FIELD.get(type(m))
    if every is None:
        every = _EVERY_FIELD[type(m)] = set(type(m).model_fields)
    if m.__pydantic_fields_set__ == every:
        object.__setattr__(m, "__pydantic_fields_set__", every)


def load_spec(path: str | Path) -> JobSpec:
    from gpuorch.jobs.yamlsafe import load_file

    p = Path(path)
    data = load_file(p, "the job spec")
    spec = parse_spec(data, str(p))
    if spec.workdir and not (p.parent / spec.workdir).expanduser().is_dir():
        raise UserInputError(f"{p}: workdir: {spec.workdir!r} is not a directory; give a path relative to the spec")
    return spec

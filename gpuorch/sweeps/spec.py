"""The sweep file: a template job, a parameter space, and limits; expanded into trial job specs.

```yaml
name: lr-sweep
job: ../tiny-mlp.yaml        # a job spec file (relative to this file), or a job spec mapping
parameters:                  # each becomes an env var of the trial; {NAME} in `run` is "${NAME}"
  LR: [0.0003, 0.001, 0.003] # grid: a list of values
  SEED: {int: [0, 9]}        # random search only: {uniform|loguniform|int: [low, high]}
search: {method: random, count: 8, seed: 1}   # default {method: grid}
max_parallel: 2
budget: {max_cost: 5.00}     # USD, all trials together
deadline: 8h                 # or 2026-11-28T08:00 (UTC unless an offset is given)
objective: {metric: loss, mode: min}    # source: result ranks by $GPUORCH_RESULT_FILE's value;
                                        # max_step: 700 (a trial's last step) spends on trials it can finish
pruning: {rule: median}      # or asha; on the objective's metric, by its "step" (gpuorch.sweeps.pruning)
notify: {routes: [team-slack], silence: [job.preempted]}  # docs/notifications.md, per job or sweep
```

``load_sweep`` raises UserInputError with one line naming the field and the fix.
"""

from __future__ import annotations

import math
import random
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from gpuorch.bounds import MAX_STEPS, MAX_TRIALS, Integer, Seed, too_far
from gpuorch.errors import UserInputError
from gpuorch.jobs.spec import Budget, Deadline, JobSpec, Seconds, Strict, _format_error, parse_spec
from gpuorch.notify.kinds import NotifySpec
from gpuorch.sweeps.command import check_names, substitute
from gpuorch.sweeps.grid import interleaved
from gpuorch.when import parse_instant

TRIAL_KEEP_WARM = "3m"  # a trial's keep_warm unless the sweep's job sets one (docs/money.md, "Warm capacity")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,55}$")  # room for "-<trial>" within a job name
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DISTRIBUTIONS = ("uniform", "loguniform", "int")
Scalar = str | int | float | bool


class Search(Strict):
    method: Literal["grid", "random"] = "grid"
    count: Integer | None = Field(default=None, ge=1, le=MAX_TRIALS)  # random: how many trials
    seed: Seed = 0


class Objective(Strict):
    metric: str
    mode: str = "min"
    source: Literal["metrics", "result"] = "metrics"  # rank by the metrics file, or by the result file
    # a trial's last step: money goes to trials it can finish
    max_step: Integer | None = Field(default=None, ge=1, le=MAX_STEPS)

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        if v not in ("min", "max"):
            raise ValueError(f"{v!r} is not a mode; use min or max")
        return v


PRUNING_RULES = ("median", "asha")


class Pruning(Strict):
    rule: str
    metric: str | None = None  # must be the objective's (the default)
    # median: no decision before; asha: the first rung (default: first step)
    min_steps: Integer = Field(default=0, ge=0, le=MAX_STEPS)
    min_trials: Integer = Field(default=1, ge=1, le=MAX_TRIALS)  # median: finished trials before it prunes
    reduction_factor: Integer = Field(default=3, ge=2, le=100)  # asha: keep 1/factor at each rung

    @field_validator("rule")
    @classmethod
    def _rule(cls, v: str) -> str:
        if v not in PRUNING_RULES:
            raise ValueError(f"{v!r} is not a pruning rule; use {' or '.join(PRUNING_RULES)}")
        return v


class SweepSpec(Strict):
    name: str
    job: dict[str, Any] | str
    parameters: dict[str, list[Scalar] | dict[str, list[float]]]
    search: Search = Field(default_factory=Search)
    max_parallel: Integer = Field(default=1, ge=1, le=MAX_TRIALS)  # more than its trials could never run
    budget: Budget | None = None
    deadline: datetime | None = None  # resolved to absolute UTC by load_sweep
    objective: Objective | None = None
    pruning: Pruning | None = None
    notify: NotifySpec | None = None  # routes added or events silenced for the sweep and its trials
    keep_warm: Seconds | None = Field(default=None, ge=0, le=24 * 3600)  # its trials' unless its job sets one

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("use 1-56 lowercase letters, digits and dashes, starting with a letter or digit")
        return v

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("no parameters; give at least one, like LR: [0.001, 0.01]")
        for name, dom in v.items():
            if not _VAR.match(name) or name.startswith("GPUORCH_"):
                raise ValueError(f"{name!r} is not a usable variable name; use letters, digits and _")
            if isinstance(dom, list) and not dom:
                raise ValueError(f"{name}: no values; give a list of at least one value")
            if isinstance(dom, dict):
                if len(dom) != 1 or next(iter(dom)) not in DISTRIBUTIONS:
                    raise ValueError(
                        f"{name}: write a list of values, or one of {', '.join(DISTRIBUTIONS)}: [low, high]"
                    )
                kind, bounds = next(iter(dom.items()))
                if len(bounds) != 2 or bounds[0] > bounds[1] or (kind == "loguniform" and bounds[0] <= 0):
                    positive = " and low > 0" if kind == "loguniform" else ""
                    raise ValueError(f"{name}: {kind} needs [low, high] with low <= high{positive}")
                if kind == "int" and math.ceil(bounds[0]) > math.floor(bounds[1]):
                    raise ValueError(f"{name}: int [{bounds[0]:g}, {bounds[1]:g}] holds no integer; widen it")
        return v

    @model_validator(mode="after")
    def _pruning(self) -> SweepSpec:
        if self.pruning is None:
            return self
        if self.objective is None:
            raise ValueError("pruning: needs an objective to prune on; add objective: {metric: loss, mode: min}")
        if self.pruning.metric is not None and self.pruning.metric != self.objective.metric:
            raise ValueError(f"pruning.metric: {self.pruning.metric!r} is not the objective's metric "
                             f"({self.objective.metric!r}); prune on the objective, or drop pruning.metric")
        return self

    @model_validator(mode="after")
    def _search(self) -> SweepSpec:
        if self.search.method == "random" and self.search.count is None:
            raise ValueError("search.count: required for random search; give the number of trials")
        if self.search.method == "grid":
            dist = next((k for k, d in self.parameters.items() if isinstance(d, dict)), None)
            if dist is not None:
                raise ValueError(
                    f"parameters.{dist}: a distribution needs search.method random; give a list for a grid"
                )
            size = math.prod(len(d) for d in self.parameters.values())
            if size > MAX_TRIALS:
                raise ValueError(f"parameters: the grid has {size} trials, more than {MAX_TRIALS}; use fewer values")
        elif (self.search.count or 0) > MAX_TRIALS:
            raise ValueError(f"search.count: at most {MAX_TRIALS}")
        return self


def points(spec: SweepSpec) -> list[dict[str, Scalar]]:
    """The trials' parameters: the grid with every parameter's values interleaved (the first k
    trials cover each parameter as evenly as k can: ``sweeps.grid``), or ``count`` seeded random
    draws."""
    names = list(spec.parameters)
    if spec.search.method == "grid":
        doms = [d for d in spec.parameters.values() if isinstance(d, list)]  # a grid has only lists (_search)
        return [{n: doms[k][i] for k, (n, i) in enumerate(zip(names, combo, strict=True))}
                for combo in interleaved([len(d) for d in doms])]
    rng = random.Random(spec.search.seed)
    return [{n: _draw(rng, spec.parameters[n]) for n in names} for _ in range(spec.search.count or 0)]


def _draw(rng: random.Random, dom: list[Scalar] | dict[str, list[float]]) -> Scalar:
    if isinstance(dom, list):
        return rng.choice(dom)
    kind, (lo, hi) = next(iter(dom.items()))
    if kind == "int":
        return rng.randint(math.ceil(lo), math.floor(hi))
    x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if kind == "loguniform" else rng.uniform(lo, hi)
    return float(f"{x:.6g}")  # readable values; the env var carries exactly this


def env_value(v: Scalar) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def trial_spec(spec: SweepSpec, template: dict[str, Any], index: int, params: dict[str, Scalar]) -> JobSpec:
    """Trial ``index``: the template named ``<sweep>-<index>``, its params as env vars, and ``{NAME}``
    in ``run`` a quoted reference to them (``sweeps.command``: no value is written into the shell)."""
    data = dict(template)
    data["name"] = f"{spec.name}-{index}"
    # a short trial pays one boot, not one per trial: the job's keep_warm, else the sweep's, else 3m
    data.setdefault("keep_warm", TRIAL_KEEP_WARM if spec.keep_warm is None else spec.keep_warm)
    env = template.get("env")
    check_names(params, env if isinstance(env, dict) else None)
    data["env"] = {**(env or {}), **{k: env_value(v) for k, v in params.items()}}
    if isinstance(template.get("run"), str):
        data["run"] = substitute(template["run"], params)
    return parse_spec(data, "sweep job")


def trial_deadline(job: JobSpec, sweep_deadline: datetime | None, submitted: datetime) -> JobSpec:
    """The trial with its effective deadline for the live policy: the earlier of the sweep's and
    the template's own (a duration counts from ``submitted``, when the trials are created), written
    as an absolute time; ``job_hours`` and ``startup`` stay the template's. A template without a
    deadline takes the sweep's where the policy can plan for it (``model.tokens`` or
    ``model.duration`` give the work); otherwise only the sweep's stop at its deadline applies."""
    if sweep_deadline is None:
        return job
    own = job.deadline
    if own is None:
        if job.model is None or (job.model.tokens is None and job.model.duration is None):
            return job
        return job.model_copy(update={"deadline": Deadline(at=sweep_deadline.isoformat())})
    at = min(own.resolve(submitted), sweep_deadline)
    return job.model_copy(update={"deadline": own.model_copy(update={"at": at.isoformat()})})


def _read_template(job: str, base: Path) -> tuple[dict[str, Any], Path]:
    """The template job file ``job`` (relative to ``base``) as a mapping, and its directory."""
    from gpuorch.jobs.yamlsafe import load_file

    path = (base / job).expanduser()
    try:
        data = load_file(path, "the template job")
    except UserInputError as e:
        raise UserInputError(f"job: {e}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"job: {path} is not a job spec; expected keys like name, run, resources")
    return data, path.parent


_ELSEWHERE = "a path on the submitting machine means nothing to the server"


def _template(spec: SweepSpec, base: Path | None) -> dict[str, Any]:
    """The template job as a mapping, its workdir made absolute. ``base`` None: the sweep came
    over the HTTP API, whose template must be inline and without a workdir (it is uploaded)."""
    where: Path | None  # what a relative workdir is relative to
    if isinstance(spec.job, str):
        if base is None:
            raise UserInputError(f"job: {_ELSEWHERE}; send the template job inline "
                                 "(`gpuorch --server URL sweep submit` does)")
        data, where = _read_template(spec.job, base)
    else:
        data, where = dict(spec.job), base
    data.setdefault("name", spec.name)
    if data.get("workdir"):
        if where is None:
            raise UserInputError(f"job.workdir: {_ELSEWHERE}; send the directory as workdir_tar "
                                 "(`gpuorch --server URL sweep submit` does)")
        workdir = (where / str(data["workdir"])).expanduser().resolve()
        if not workdir.is_dir():
            raise UserInputError(
                f"job.workdir: {str(workdir)!r} is not a directory; give a path relative to the job spec"
            )
        data["workdir"] = str(workdir)
    return data


def _read(p: Path) -> Any:
    from gpuorch.jobs.yamlsafe import load_file  # unique keys, no aliases or tags, UTF-8, bounded

    return load_file(p, "the sweep")


def load_sweep(path: str | Path, now: datetime) -> tuple[SweepSpec, list[tuple[dict[str, Scalar], JobSpec]]]:
    """The validated sweep and its trials (parameters, job spec); UserInputError on bad input."""
    p = Path(path)
    return parse_sweep(_read(p), str(p), now, p.parent)


def parse_sweep(data: Any, source: str, now: datetime, base: Path | None = None,
                ) -> tuple[SweepSpec, list[tuple[dict[str, Scalar], JobSpec]]]:
    """A sweep as written (a mapping), validated and expanded into its trials; UserInputError with
    one line starting with ``source`` on bad input. ``base`` is the sweep file's directory (a
    template job file and its workdir are relative to it); None for a sweep sent to the HTTP API,
    whose template is inline and whose workdir is uploaded (``remote_request``)."""
    if not isinstance(data, dict):
        raise UserInputError(f"{source}: expected a mapping of keys like name, job, parameters")
    data = dict(data)
    written = data.get("deadline")
    if data.get("deadline") is not None:
        try:
            data["deadline"] = parse_instant(data["deadline"], now)
        except (ValueError, OverflowError) as e:
            raise UserInputError(f"{source}: deadline: {e}") from None
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        if not err["loc"] and str(err["msg"]).startswith("Value error, "):  # a model-level check names its field
            raise UserInputError(f"{source}: {str(err['msg']).removeprefix('Value error, ')}") from None
        raise UserInputError(_format_error(err, source, SweepSpec)) from None
    if spec.deadline is not None and spec.deadline <= now:
        raise UserInputError(f"{source}: deadline: {spec.deadline:%Y-%m-%d %H:%M} UTC is in the past; give a later "
                             "time or a duration like 8h")
    if spec.deadline is not None and too_far(written, spec.deadline, now):
        raise UserInputError(f"{source}: deadline: {str(written)[:40]} is more than ten years away; give a nearer one")
    try:
        template = _template(spec, base)
        trials = [(params, trial_deadline(trial_spec(spec, template, i, params), spec.deadline, now))
                  for i, params in enumerate(points(spec))]
    except UserInputError as e:
        raise UserInputError(f"{source}: {e}") from None
    return spec, trials


def remote_request(path: str | Path) -> tuple[dict[str, Any], Path | None]:
    """The sweep file as ``gpuorch --server URL sweep submit`` sends it (after ``load_sweep`` has
    validated it here): as written, with a template job file read in inline and the template's
    workdir taken out; and that workdir, absolute, to upload (or None)."""
    p = Path(path)
    data = dict(_read(p))
    if isinstance(data.get("job"), str):
        job, where = _read_template(data["job"], p.parent)
    else:
        job, where = dict(data.get("job") or {}), p.parent
    job = dict(job)
    workdir = job.pop("workdir", None)
    data["job"] = job
    return data, (where / str(workdir)).expanduser().resolve() if workdir else None

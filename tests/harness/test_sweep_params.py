"""Issue 31, item 2, through the assembled daemon: sweep parameter values full of shell syntax
reach each trial exactly, as a word, inside "..." and in a here-document, and never run.

Before, ``{V}`` was replaced by the quoted value, and a quoting check guarded the user's own
quotes; a comment, ``$'...'`` or quotes inside ``$(...)`` got past it and an injected ``touch``
ran. Now ``{V}`` is a quoted reference to the trial's environment variable ``V``.
"""

from __future__ import annotations

import json

import pytest
import yaml
from sqlmodel import select

from gpuorch.store.models import Job, JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(600)


def test_hostile_parameter_values_reach_each_trial_exactly_and_never_run(tmp_path):
    mark = tmp_path / "MARK"
    values = [f"$(touch {mark})", "$(touch MARK)", f";touch {mark}", f"`touch {mark}`", f"x'; touch {mark}; echo '",
              f'a "b" \\c $\'\\n\' "$(touch {mark})"', f"line1\nline2\ntouch {mark}\n", "  *  ", "$V ${V} {V} EOF",
              f"a[$(touch {mark})]"]
    out = tmp_path / "out"
    out.mkdir()
    at = f"{out}/$GPUORCH_JOB_ID"
    run = (f"printf %s {{V}} > {at}.word && printf %s \"[{{V}}]\" > {at}.dq # it's {{V}}\n"
           f"cat > {at}.doc <<EOF\n{{V}}\nEOF\n")
    sweep = {"name": "hostile", "max_parallel": 4, "parameters": {"V": values},
             "job": {"run": run, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    with AssembledDaemon.start(tmp_path / "home") as d:
        sweep_id = d.submit_sweep(path)["id"]

        def trials() -> list[Job]:
            with d.store.read() as s:
                return list(s.exec(select(Job).where(Job.sweep_id == sweep_id)))

        d.until(lambda: all(j.status.terminal for j in trials()), timeout_s=540, what="every trial to end")
        done = trials()
        assert len(done) == len(values)
        seen = []
        for job in done:
            assert job.status == JobStatus.SUCCEEDED, (job.name, d.attempts(job.id))
            value = json.loads(job.params or "{}")["V"]
            seen.append(value)
            assert (out / f"{job.id}.word").read_text() == value
            assert (out / f"{job.id}.dq").read_text() == f"[{value}]"
            assert (out / f"{job.id}.doc").read_text() == value + "\n"
        assert sorted(seen) == sorted(values)
    assert not mark.exists()
    assert [p for p in tmp_path.rglob("MARK")] == []  # nor in any trial's run directory

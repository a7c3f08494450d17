"""An instance is compared by value (issue 32: one memo, compared by value; DESIGN.md 4): a
provider may list each unchanged instance as a new object every pass, as the local provider and
the cloud adapters do (a fresh ``Instance`` from each API answer), and the steady pass still keeps
its running job without deciding it again. Before, an instance was "unchanged" only as the very
object the memo held, so only a provider that reused its objects (the sim) ever had a job kept."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.provider.port import Instance
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)


def _recorded_listings(adapter: Any) -> list[dict[str, Instance]]:
    """Record what ``adapter`` lists, each listing as it was handed to the daemon."""
    listings: list[dict[str, Instance]] = []
    real = adapter.list_managed

    def list_managed() -> list[Instance]:
        out = real()
        listings.append({i.id: i for i in out})
        return out

    adapter.list_managed = list_managed  # the instance's attribute: what every wrapper above it calls
    return listings


def test_a_running_job_is_kept_though_each_listing_is_a_new_object_of_the_same_value(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        listings = _recorded_listings(d.adapter("local"))
        marker = tmp_path / "go"
        job = d.submit({"name": "by-value", "run": f"until test -e {marker}; do sleep 0.1; done; echo done",
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        d.until(lambda: d.status(job) == JobStatus.RUNNING, what="the job to run")
        d.until(lambda: d.rec.steady.skipped, what="a steady pass to keep the job undecided")
        # What it kept it on: the last two listings hold the same instance as two objects of one value.
        before, now = listings[-2], listings[-1]
        assert before.keys() == now.keys() and now
        assert all(now[i] is not before[i] and now[i] == before[i] for i in now)
        marker.touch()  # a change is still seen: the job ends, its instance is terminated
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.SUCCEEDED

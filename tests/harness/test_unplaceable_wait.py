"""A queued job that no offer fits waits on what its "no offer" depends on (issue 32, item 5).

Before, such a job was decided again every ``no_offer_retry_s`` (30 s): 5,000 of them re-ranked
the catalog and rewrote their rows for 26 % of a core. Now the pass keeps it, unviewed and
undecided, while its job row, its attempts, the offers index, the back-offs in force and the
settings have the values its "no offer" was decided from (``reconciler/memo.py``
``WaitingJobs``), and decides it at the first pass after one of them changes: an offer appears,
a back-off expires, a cancel. Decisions are counted by the memo (``waiting.noted``: "no offer"
decisions; ``waiting.skipped``: jobs kept by it in the last pass).

The default daemon's local provider stands in for a cloud; its market is the offer list the
adapter was built with, which the test empties and refills (the next pass reads it again,
``invalidate_offers``, as after the catalog TTL).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuorch.store.models import Backoff, JobStatus
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(240)

JOB = {"name": "w", "run": "true", "resources": {"gpu": "A100:80GB:1"}}


def _no_offer(d: AssembledDaemon, job: int) -> bool:
    return (d.job(job).message or "").startswith("no offer fits")


def test_an_unplaceable_job_waits_for_an_offer_or_a_cancel(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        local, waiting = d.adapter("local"), d.rec.memo.waiting
        market = local._offers
        local._offers = []  # the market sells nothing that fits
        d.rec.invalidate_offers()
        kept, cancelled = d.submit(JOB), d.submit({**JOB, "name": "c"})
        d.run_pass()
        assert _no_offer(d, kept) and _no_offer(d, cancelled)
        assert d.job(kept).not_before is None  # no timer: it waits on its inputs
        assert waiting.noted == 2
        written = d.job(kept).updated_at
        for _ in range(3):  # nothing changed: neither decided nor written again
            d.run_pass()
            assert waiting.noted == 2 and waiting.skipped == 2
        assert d.job(kept).updated_at == written and d.attempts(kept) == []

        d.service.cancel(str(cancelled))  # a cancel is decided at the next pass
        d.run_pass()
        assert d.status(cancelled) == JobStatus.CANCELLED
        assert waiting.noted == 2 and waiting.skipped == 1

        local._offers = market  # an offer appears: decided at once, and launched
        d.rec.invalidate_offers()
        d.run_pass()
        assert len(d.attempts(kept)) == 1
        assert d.until_terminal(kept).status == JobStatus.SUCCEEDED


def test_an_unplaceable_job_is_decided_when_its_back_off_expires(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        waiting = d.rec.memo.waiting
        job = d.submit(JOB)
        until = d.rec.clock.now() + timedelta(seconds=1.5)
        with d.store.write() as s:  # every local offer backed off, as after launches found no capacity
            s.add(Backoff(key="local", until=until, reason="test"))
        d.run_pass()
        assert _no_offer(d, job) and waiting.noted == 1
        while d.rec.clock.now() < until - timedelta(seconds=0.5):  # no write, no new offer: kept
            d.run_pass()
            assert waiting.noted == 1 and waiting.skipped == 1 and d.attempts(job) == []
        d.until(lambda: d.attempts(job), what="a launch once the back-off expired")
        assert waiting.noted == 1  # decided once more, and placed: no second "no offer"
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED

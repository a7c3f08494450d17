"""A gang (``nodes: 2``) on the embedded default: the daemon ``gpuorch daemon`` builds (metrics
wrapper on) launches both nodes, runs the job to the end, and bills both nodes for the attempt's
whole life. Before, the wrapper hid ``max_nodes`` and the gang waited for an offer forever."""

from __future__ import annotations

import pytest

from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.timeout(300)


def test_a_two_node_gang_launches_and_finishes_under_the_default_daemon(tmp_path):
    with AssembledDaemon.start(tmp_path / "home") as d:
        assert d.metrics is not None and type(d.provider("local")).__name__ == "InstrumentedProvider"
        job = d.submit({"name": "gang", "run": 'test -n "$NODE_RANK" && sleep 2', "nodes": 2,
                        "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"})
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        (a,) = d.attempts(job)
        assert a.reason == TerminationReason.SUCCEEDED
        local = d.adapter("local")
        offer = next(o for o in local.offers() if o.zone == a.zone and o.instance_type == a.instance_type
                     and o.region == a.region)
        assert a.price_per_hour == pytest.approx(2 * offer.price_per_hour)  # both nodes bill

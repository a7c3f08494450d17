"""decide, pure: a gang (``nodes: N``) is launched only on providers that place N nodes per job
(``Settings.max_nodes``, which the reconciler fills from each provider's ``Capabilities.max_nodes``)."""

from __future__ import annotations

from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler.decide.actions import Launch
from gpuorch.reconciler.decide.job import JobView, Settings, decide
from gpuorch.reconciler.observe.views import for_providers
from gpuorch.store.models import Job, JobStatus
from gpuorch.testing.fake_provider import FakeProvider, default_offers

SPEC = parse_spec({"name": "g", "run": "torchrun train.py", "resources": {"gpu": "A100:80GB:1"},
                   "spot_policy": "on-demand", "nodes": 2})


def offers():
    """The fake's offers (provider ``fake``), and the same at twice the price on ``gangs``."""
    cheap = default_offers()
    return cheap + [o.model_copy(update={"provider": "gangs", "price_per_hour": o.price_per_hour * 2}) for o in cheap]


def launched_on(clock, settings: Settings) -> set[str]:
    job = Job(id=1, name="g", spec=SPEC.model_dump_json(), status=JobStatus.QUEUED, created_at=clock.now())
    d = decide(JobView(job, SPEC, []), clock.now(), offers(), settings=settings)
    [launch] = [a for a in d.actions if isinstance(a, Launch)]
    return {c.offer.provider for c in launch.candidates}


def test_a_gang_goes_only_where_its_nodes_can_be_placed(clock):
    assert launched_on(clock, Settings()) == {"fake", "gangs"}  # no limits known: the cheapest first
    assert launched_on(clock, Settings(max_nodes=(("fake", 1), ("gangs", 8)))) == {"gangs"}


def test_the_reconciler_reads_each_providers_limit():
    settings = for_providers(Settings(), {"fake": FakeProvider(), "other": FakeProvider(name="other")})
    assert settings.max_nodes == (("fake", 1), ("other", 1))

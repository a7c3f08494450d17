"""A daemon that dies inside every pass still protects the money: the orphan sweep runs before
the pass's launches and terminations, each of them a crash point."""

from __future__ import annotations

from daemon_proc import CONFIG
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import LaunchRequest
from gpuorch.store import Store
from gpuorch.store.models import Event
from gpuorch.testing.crash import kill_at
from gpuorch_local.provider import LocalProvider


def test_a_daemon_killed_at_its_first_launch_has_already_swept_the_orphans(tmp_path, _isolated_home):
    home = _isolated_home
    store = Store(f"sqlite:///{home / 'state.db'}")
    local = LocalProvider(home / "local")
    # What an earlier life left billing: this installation's instance, and no attempt owns it.
    stray = local.launch(LaunchRequest(job_id=999, attempt=1, offer=local.offers()[0], spot=False,
                                       owner=store.installation_id))
    jobs.submit(store, parse_spec({"name": "queued", "run": "true", "resources": {"gpu": "A100:80GB:1"},
                                   "spot_policy": "on-demand"}), utcnow())
    kill_at(home, CONFIG + "metrics: {enabled: false}\n", "launch.intent")  # by its first launch, in its first pass
    assert not local.get(stray.id).state.alive
    with store.read() as s:
        assert [e.job_id for e in s.exec(select(Event).where(Event.kind == "orphan_terminated"))] == [999]

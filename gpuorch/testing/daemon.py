"""The assembled daemon, for feature tests: the reconciler exactly as ``gpuorch daemon`` builds it.

``AssembledDaemon.start(home, config)`` writes ``config`` (YAML text or a mapping; empty: the
embedded default) to a file and loads it the way ``gpuorch daemon --config FILE`` does
(``ops.config_sources.load``: defaults, the file, ``GPUORCH_*`` of ``env``), then builds the
store, the metrics and the reconciler with ``ops.daemon.assemble``, the daemon's own function:
the default settings, the metrics wrapper around every provider (on by default, as in
production), the providers from their entry points, the real store. Jobs and sweeps go in
through ``JobService``, the path of ``gpuorch submit`` and ``gpuorch sweep submit``, so its
checks run too. Passes are driven by the test (``run_pass``/``until``), never by a thread.

A test that builds a bare ``Reconciler`` instead must say why in its docstring (a fake clock
or a fake provider the entry points cannot build, a unit under test below the daemon):
``tests/test_harness_rule.py`` holds every test module to that.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpuorch.store.models import Attempt, Job, JobStatus, Sweep
from gpuorch.testing.e2e import passes_until

if TYPE_CHECKING:
    from gpuorch.jobs.service import JobService
    from gpuorch.ops.config import DaemonConfig
    from gpuorch.provider.port import Provider
    from gpuorch.reconciler import Reconciler
    from gpuorch.store import Store


class AssembledDaemon:
    """One daemon's reconciler, store and metrics, built from a config file under ``home``."""

    def __init__(self, config: DaemonConfig) -> None:
        from gpuorch.jobs.service import JobService
        from gpuorch.ops.daemon import assemble

        self.config = config
        self.store: Store
        self.rec: Reconciler
        self.store, self.metrics, self.rec = assemble(config)
        self.service: JobService = JobService(self.store, config.home, now=self.rec.clock.now,
                                              providers=config.providers)

    @classmethod
    def start(cls, home: Path, config: str | Mapping[str, Any] = "", *,
              env: Mapping[str, str] | None = None) -> AssembledDaemon:
        """Load ``config`` as ``gpuorch daemon --config`` would, with ``GPUORCH_HOME=home``.

        ``env`` replaces the process environment as the loader's source of ``GPUORCH_*``
        (default: none of the caller's, so a developer's settings never leak into a test).
        """
        from gpuorch.ops.config_sources import load

        home.mkdir(parents=True, exist_ok=True)
        text = config if isinstance(config, str) else yaml.safe_dump(dict(config))
        path = home / "daemon-config.yaml"
        path.write_text(text)
        # No file of this machine or user applies (/etc/gpuorch, ~/.config/gpuorch): only ``config``.
        environ = {"GPUORCH_HOME": str(home), "HOME": os.environ.get("HOME", str(home)),
                   "XDG_CONFIG_HOME": str(home / ".no-user-config"),
                   "CONFIGURATION_DIRECTORY": str(home / ".no-system-config"), **(env or {})}
        return cls(load(path, env=environ).config)

    # -- what users do ------------------------------------------------------------------------

    def submit(self, spec: Mapping[str, Any] | str, source: str = "job spec") -> int:
        """Queue a job as ``gpuorch submit`` does (validated, fit-checked); its id."""
        from gpuorch.jobs.spec import parse_spec

        data = yaml.safe_load(spec) if isinstance(spec, str) else dict(spec)
        return int(self.service.submit(parse_spec(data, source), source)["id"])

    def submit_sweep(self, path: Path) -> dict[str, Any]:
        """Queue a sweep file as ``gpuorch sweep submit`` does; the service's answer."""
        from gpuorch.sweeps.spec import load_sweep

        spec, trials = load_sweep(path, self.rec.clock.now())
        return self.service.sweep_submit(spec, trials, str(path))

    # -- driving and reading ------------------------------------------------------------------

    def run_pass(self) -> float:
        return self.rec.run_pass()

    def until(self, check: Callable[[], Any], *, timeout_s: float = 120.0, what: str = "the daemon's progress") -> Any:
        """Run passes until ``check`` returns something truthy; return it."""
        return passes_until(self.run_pass, check, timeout_s=timeout_s, what=what)

    def until_terminal(self, job_id: int, *, timeout_s: float = 240.0) -> Job:
        self.until(lambda: self.job(job_id).status.terminal, timeout_s=timeout_s, what=f"job {job_id} to end")
        return self.job(job_id)

    def job(self, job_id: int) -> Job:
        with self.store.read() as s:
            job = s.get(Job, job_id)
            assert job is not None, f"no job {job_id}"
            return job

    def status(self, job_id: int) -> JobStatus:
        return self.job(job_id).status

    def attempts(self, job_id: int) -> list[Attempt]:
        from gpuorch.jobs import intent

        with self.store.read() as s:
            return intent.attempts_of(s, job_id)

    def sweep(self, sweep_id: int) -> Sweep:
        with self.store.read() as s:
            sweep = s.get(Sweep, sweep_id)
            assert sweep is not None, f"no sweep {sweep_id}"
            return sweep

    def provider(self, name: str) -> Provider:
        """The daemon's provider ``name`` as the reconciler holds it (wrapped)."""
        return self.rec.providers[name]

    def adapter(self, name: str) -> Any:
        """The adapter under every wrapper, for a test's own hooks (``inject_preemption``...)."""
        p: Any = self.rec.providers[name]
        while hasattr(type(p), "inner"):
            p = p.inner
        return p

    def close(self) -> None:
        self.rec.release_leases()
        for p in self.rec.providers.values():
            p.close()
        self.store.close()

    def __enter__(self) -> AssembledDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One ``SshRunner`` per cloud instance, made on demand with its host key pinned: the runner
side of every adapter whose instances the daemon reaches over SSH (AWS, GCP, Azure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..provider import Instance
from ..runner import Runner, RunnerUnavailable

RunnerOptions = Callable[[Instance], Mapping[str, Any]]


class Runners:
    """One ``SshRunner`` per instance (it keeps its connection between passes), made on demand.

    ``options(instance)``, if given, returns overrides for that instance's runner: ``host`` and
    ``port`` (where its sshd listens instead of ``instance.host``:22) and any ``SshRunner``
    keyword argument (``python``, ``remote_root``, ``notice``, ``agent_env``, retry knobs).
    Tests use it to stand a local sshd in for each cloud instance; the daemon passes none.
    """

    def __init__(self, home: Path | None, user: str, options: RunnerOptions | None = None, provider: str = "aws") -> None:
        self.home, self.user, self.options, self.provider = home, user, options, provider
        self._runners: dict[str, tuple[tuple[str, int], Runner]] = {}

    def get(self, instance: Instance) -> Runner:
        """The runner of ``instance``, with its host key pinned. RunnerUnavailable until the
        instance has an address; NotImplementedError without a home or the SSH runner."""
        if self.home is None:
            raise NotImplementedError(f"{self.provider}: no runner without a home for keys; build the provider with from_config")
        try:
            from . import hostkeys, keys
            from .ssh import SshRunner
        except ImportError as e:
            raise NotImplementedError(f"{self.provider}: the SSH runner is not available ({e}); "
                                      f"install gpuorch[{self.provider}]") from None
        if instance.job_id is None or instance.attempt is None:
            raise RunnerUnavailable(f"{instance.id} carries no gpuorch job and attempt tags")
        if not instance.host:
            raise RunnerUnavailable(f"{instance.id} has no address yet")
        overrides = dict(self.options(instance)) if self.options is not None else {}
        address = (str(overrides.pop("host", instance.host)), int(overrides.pop("port", instance.port or 22)))
        cached = self._runners.get(instance.id)
        if cached is not None and cached[0] == address:
            return cached[1]
        key_path, _ = keys.ensure_job_key(self.home, instance.job_id)
        _, host_public = keys.ensure_host_key(self.home, instance.job_id, instance.attempt)
        known_hosts = hostkeys.known_hosts_path(self.home)
        hostkeys.pin_host_key(known_hosts, *address, host_public)
        runner = SshRunner(*address, self.user, key_path, known_hosts, **overrides)
        self.forget(instance.id, unpin=False)  # an address change: the new pin replaced the old
        self._runners[instance.id] = (address, runner)
        return runner

    def forget(self, instance_id: str, unpin: bool = True) -> None:
        """Close the instance's runner; unpin its address too when the instance is going (the
        pin is made again from the key files if it is not)."""
        cached = self._runners.pop(instance_id, None)
        if cached is None:
            return
        from . import hostkeys

        cached[1].close()  # type: ignore[attr-defined]
        if unpin and self.home is not None:
            hostkeys.unpin_host_key(hostkeys.known_hosts_path(self.home), *cached[0])

    def close(self) -> None:
        """Close every connection; pins stay (the instances may outlive this process)."""
        for instance_id in list(self._runners):
            self.forget(instance_id, unpin=False)

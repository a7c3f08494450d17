"""One ``SshRunner`` per cloud instance, made on demand with its host key pinned: the runner
side of every adapter whose instances the daemon reaches over SSH (AWS, GCP, Azure)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuorch.agent.protocol import NoticeSource
from gpuorch.provider.port import Instance
from gpuorch.runners.port import Runner, RunnerUnavailable

log = logging.getLogger("gpuorch.runners")
RunnerOptions = Callable[[Instance], Mapping[str, Any]]
# Host keys the cloud itself reports for an instance over a trusted channel (its authenticated
# API, not the network path to the instance), as OpenSSH public key lines; None while it has
# not reported them yet. See ``Runners``.
HostKeySource = Callable[[Instance], Sequence[str] | None]
# How a cloud VM powers itself off when a warm instance's daemon went silent (gpuorch.agent.idle):
# the login has passwordless sudo on the clouds' images; AWS launches with shutdown behaviour
# "terminate", GCP and Azure stop the VM (no GPU billing), and the daemon, back, releases it.
IDLE_SHUTDOWN = "sudo -n shutdown -h now"


class Runners:
    """One ``SshRunner`` per instance (it keeps its connection between passes), made on demand.

    ``options(instance)``, if given, returns overrides for that instance's runner: ``host`` and
    ``port`` (where its sshd listens instead of ``instance.host``:22) and any ``SshRunner``
    keyword argument (``python``, ``remote_root``, ``notice``, ``agent_env``, retry knobs).
    Tests use it to stand a local sshd in for each cloud instance; the daemon passes none.

    Host keys: the runner trusts the host key the daemon made for the attempt and handed to
    cloud-init (``keys.ensure_host_key``), pinned once, before the first connection. With
    ``host_keys`` (GCP: the keys the guest agent published in guest attributes, which may have
    replaced ours at first boot), the pin is made again before every new connection instead:
    the keys ``host_keys(instance)`` returns, each replacing ours if of the same type (ours
    stays for any other type; theirs are preferred); while it returns None (not reported yet)
    the runner is not ready (``RunnerUnavailable``) and connects to nothing. The source decides
    how long "not yet" may last (it returns [] to fall back to our key alone). Nothing is ever
    trusted on first use.
    """

    def __init__(self, home: Path | None, user: str, options: RunnerOptions | None = None, *, provider: str,
                 notice: NoticeSource | None = None, host_keys: HostKeySource | None = None) -> None:
        self.home, self.user, self.options, self.provider = home, user, options, provider
        self.notice = notice  # where the agent hears of a preemption (the adapter's notice kind)
        self.host_keys = host_keys
        self._runners: dict[str, tuple[tuple[str, int], Runner]] = {}

    def get(self, instance: Instance) -> Runner:
        """The runner of ``instance``, with its host key pinned. RunnerUnavailable until the
        instance has an address; NotImplementedError without a home or the SSH runner."""
        if self.home is None:
            raise NotImplementedError(f"{self.provider}: no runner without a home for keys; "
                                      "build the provider with from_config")
        try:
            from gpuorch.runners import hostkeys, keys
            from gpuorch.runners.ssh import SshRunner
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
        if self.host_keys is None:
            hostkeys.pin_host_key(known_hosts, *address, host_public)
        else:
            overrides["before_connect"] = self._pinner(instance, address, host_public, known_hosts)
        if self.notice is not None:
            overrides.setdefault("notice", self.notice)
        overrides.setdefault("idle_shutdown_command", IDLE_SHUTDOWN)  # a cloud VM, never an SSH pool's host
        runner = SshRunner(*address, self.user, key_path, known_hosts, **overrides)
        self.forget(instance.id, unpin=False)  # an address change: the new pin replaced the old
        self._runners[instance.id] = (address, runner)
        return runner

    def _pinner(self, instance: Instance, address: tuple[str, int], ours: str, known_hosts: Path) -> Callable[[], None]:
        """Pin ``instance``'s trusted host keys for ``address`` (the rule in the class docstring)."""
        from gpuorch.runners import hostkeys

        source = self.host_keys
        assert source is not None

        def pin() -> None:
            reported = source(instance)
            if reported is None:
                raise RunnerUnavailable(f"{instance.id}: the cloud has not reported its SSH host keys yet; "
                                        "not connecting until it has")
            by_type: dict[str, str] = {}
            for key in reported:
                try:
                    key_type, blob = hostkeys.parse_public_key(key)
                except ValueError as e:
                    raise RunnerUnavailable(f"{instance.id}: the cloud reported a host key that is not one: {e}; "
                                            "not connecting") from None
                by_type[key_type] = f"{key_type} {blob}"
            own_type, own_blob = hostkeys.parse_public_key(ours)
            by_type.setdefault(own_type, f"{own_type} {own_blob}")
            previous = hostkeys.pin_host_keys(known_hosts, *address, list(by_type.values()))
            if sorted(previous) != sorted(by_type.values()):
                log.info("%s: pinned host keys %s for %s", instance.id,
                         ", ".join(hostkeys.fingerprint(k) for k in by_type.values()), hostkeys.host_pattern(*address))

        return pin

    def forget(self, instance_id: str, unpin: bool = True) -> None:
        """Close the instance's runner; unpin its address too when the instance is going (the
        pin is made again from the key files if it is not)."""
        cached = self._runners.pop(instance_id, None)
        if cached is None:
            return
        from gpuorch.runners import hostkeys

        cached[1].close()  # type: ignore[attr-defined]
        if unpin and self.home is not None:
            hostkeys.unpin_host_key(hostkeys.known_hosts_path(self.home), *cached[0])

    def close(self) -> None:
        """Close every connection; pins stay (the instances may outlive this process)."""
        for instance_id in list(self._runners):
            self.forget(instance_id, unpin=False)

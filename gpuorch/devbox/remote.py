"""Where ``gpuorch ssh`` and ``gpuorch port`` go: the running attempt of a job or dev box, reached
the way the daemon reaches it.

``endpoint`` reads the job's live attempt from the store, builds its provider from this host's
configuration (as the daemon does, with the SSH pools' slot ledger on the store) and asks it for
the instance and its runner. An ``SshRunner`` gives the address, the login, the daemon's key for
the job and the installation's pinned known_hosts: connections verify the host key against that
file and nothing else, and no ``~/.ssh/config`` is needed. A ``LocalRunner`` (the local and sim
providers run jobs as processes of this host, with no sshd) gives the run directory: a session
there is a shell on this host, as the user the job runs as, in the job's working directory.
Any other runner (Kubernetes pods) is refused with one line.

A job with an ``image:`` runs in a container on its instance; the endpoint then names that
container (``Container``), found in the run directory's ``containers.jsonl`` (what the agent
started: the runtime it used and the container's name). A record is taken only when its name is
the one the agent gives this job's attempt (``gpuorch.agent.container.container_name``: this
installation, job and attempt) and its runtime is one the agent may have used (``docker`` or
``podman`` as detected on the instance, or the runtime this host's configuration names): the
file lies in a directory the job can write to, and what it names is run by the session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuorch.agent.container import container_name
from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    import paramiko

    from gpuorch.ops.config import DaemonConfig

WORK_DIR = "work"  # the job's working directory under its run dir (gpuorch.agent.protocol.WORK_DIR)
CONTAINERS_MAX_BYTES = 1 << 16
DETECTED = (("docker",), ("podman",))  # what the agent's detect_runtime gives
PHASES = ("running", "setup")  # the phases whose commands run in the job's container
Want = Literal["require", "prefer", "never"]  # whether the endpoint must, may or must not name the job's container


@dataclass(frozen=True)
class Container:
    """The job's container on the instance: the runtime's argv prefix and the container's name."""

    runtime: tuple[str, ...]
    name: str


@dataclass(frozen=True)
class SshEndpoint:
    host: str
    port: int
    user: str
    key_path: Path
    known_hosts: Path
    run_dir: str  # absolute, on the instance
    container: Container | None = None  # the job's container: sessions run in it

    def connect(self, timeout_s: float = 10.0) -> paramiko.SSHClient:
        """A connected client; the host key verified against ``known_hosts`` only (RejectPolicy).
        Raises UserInputError (one line) when the host cannot be reached or its key is not the pinned one."""
        from gpuorch.runners.connection import SshConnection
        from gpuorch.runners.port import RunnerUnavailable

        conn = SshConnection(self.host, self.port, self.user, self.key_path, self.known_hosts,
                             connect_timeout=timeout_s, connect_attempts=2, retry_wait_s=0.5, retry_wait_max_s=1.0)
        try:
            client: paramiko.SSHClient = conn.call("connect", lambda c, _sftp: c)
        except RunnerUnavailable as e:
            raise UserInputError(f"cannot reach {self.user}@{self.host}:{self.port}: {e}") from None
        return client


@dataclass(frozen=True)
class LocalEndpoint:
    run_dir: Path  # the attempt's run directory on this host
    container: Container | None = None  # the job's container: sessions run in it


Endpoint = SshEndpoint | LocalEndpoint


def endpoint(config: DaemonConfig, ref: str, command: str = "gpuorch ssh",
             container: Want = "prefer") -> tuple[dict[str, Any], Endpoint]:
    """The job ``ref`` (id or name) as ``{id, name, status, kind, attempt}`` and the endpoint of its
    running attempt. Raises UserInputError naming what to do when it has none (finished, held,
    not running yet), when its provider is not configured here or runs jobs without a shell.
    ``container``: for a job with an ``image:``, ``require`` its container (UserInputError while
    it has not started), ``prefer`` it (else the instance), or ``never`` (the instance itself)."""
    from gpuorch.jobs.intent import attempts_of, find_job
    from gpuorch.jobs.kinds import kind_of
    from gpuorch.store import Store

    store = Store(config.url)
    try:
        with store.read() as s:
            job = find_job(s, ref)
            attempts = attempts_of(s, job.id)  # type: ignore[arg-type]
            kind = kind_of(job.spec)
            info = {"id": job.id, "name": job.name, "status": job.status.value, "kind": kind}
            _check_running(command, job.name, job.status.value, job.status.terminal, kind)
            live = [a for a in attempts if a.status.live and a.instance_id]
            if not live or job.status.value != "running":
                raise UserInputError(f"{command}: {job.name} is {job.status.value}, not running yet; wait until "
                                     f"'gpuorch status {job.name}' says running, then try again")
            attempt = live[-1]
            info["attempt"] = attempt.number
            provider_name, instance_id = attempt.provider, str(attempt.instance_id)
            image = _image(job.spec) if container != "never" else None
            names = {container_name(int(job.id or 0), attempt.number, phase, 0, store.installation_id)
                     for phase in PHASES}
        ep, looked = _resolve(config, store, command, provider_name, instance_id, names if image else None)
        if looked and ep.container is None and container == "require":
            name = info["name"]
            raise UserInputError(f"{command}: {name} runs in image {image}, and its container has not started yet "
                                 f"(the image may still be pulling); try again shortly, or '{command} --host {name}' "
                                 "for a shell on the instance itself")
        return info, ep
    finally:
        store.close()


def _image(spec_text: str | None) -> str | None:
    try:
        image = json.loads(spec_text or "{}").get("image")
    except (ValueError, AttributeError):
        return None
    return image if isinstance(image, str) and image else None


def find_container(text: str, names: set[str], runtimes: tuple[tuple[str, ...], ...]) -> Container | None:
    """The newest record of ``containers.jsonl`` (``text``) whose name is one of ``names`` and whose
    runtime is one of ``runtimes``; None when there is none (not started yet, or not to be trusted)."""
    found = None
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        runtime, name = record.get("runtime"), record.get("name")
        if not isinstance(runtime, list) or not all(isinstance(x, str) for x in runtime):
            continue
        if name in names and tuple(runtime) in runtimes:
            found = Container(tuple(runtime), str(name))
    return found


def _check_running(command: str, name: str, status: str, terminal: bool, kind: str) -> None:
    if terminal:
        again = f"start a new dev box with 'gpuorch dev {name}'" if kind == "dev" else "submit it again to run it"
        raise UserInputError(f"{command}: {name} is {status} (finished): it has no instance to connect to; {again}")
    if status == "held":
        raise UserInputError(f"{command}: {name} is held (stopped, its volume kept); 'gpuorch dev {name}' starts it "
                             "again" if kind == "dev" else f"{command}: {name} is held, not running; wait for it")


def _resolve(config: DaemonConfig, store: Any, command: str, provider_name: str, instance_id: str,
             names: set[str] | None) -> tuple[Endpoint, bool]:
    """The endpoint of the instance, and whether the job's container was looked for: with ``names``
    (the job has an image) the container among them, unless the instance is the job's image
    itself (``InImageRunner``: RunPod, Vast)."""
    from gpuorch.provider.localdir.runner import LocalRunner
    from gpuorch.registry import load_providers
    from gpuorch.runners.ssh import SshRunner
    from gpuorch.store.slots import bind_slot_ledgers

    options = config.providers.get(provider_name)
    if options is None:
        raise UserInputError(f"{command}: the job runs on provider {provider_name!r}, which this host's configuration "
                             f"does not enable; run {command} where the daemon's configuration is, or pass --config")
    providers = load_providers({provider_name: options}, config.home)
    bind_slot_ledgers(providers, store)
    provider = providers[provider_name]
    try:
        instance = provider.get(instance_id)
        outer = provider.runner(instance)
        runner = _shell_runner(outer)
        names = None if _in_image(outer) else names
        if isinstance(runner, LocalRunner):
            rundir = Path(runner.rundir)
            configured = tuple(runner.container.runtime) if runner.container and runner.container.runtime else None
            found = _local_container(rundir, names, DETECTED + ((configured,) if configured else ()))
            return LocalEndpoint(rundir, found), names is not None
        if isinstance(runner, SshRunner):
            c = runner.connection
            # the run dir as the runner computes it (remote_root with ~ resolved on the instance)
            run_dir, text = c.call("find the run directory", lambda _client, sftp: _remote(runner, sftp, names))
            found = find_container(text, names, DETECTED) if names else None
            return SshEndpoint(c.host, c.port, c.user, c.key_path, c.known_hosts_path, run_dir, found), \
                names is not None
        raise UserInputError(f"{command}: provider {provider_name!r} runs jobs without an SSH login "
                             f"({type(runner).__name__}); use its own tools to open a shell")
    finally:
        provider.close()


def _local_container(rundir: Path, names: set[str] | None,
                     runtimes: tuple[tuple[str, ...], ...]) -> Container | None:
    from gpuorch.agent.protocol import CONTAINERS_FILE

    if not names:
        return None
    try:
        with open(rundir / CONTAINERS_FILE, "rb") as f:
            text = f.read(CONTAINERS_MAX_BYTES).decode(errors="replace")
    except OSError:
        return None
    return find_container(text, names, runtimes)


def _remote(runner: Any, sftp: Any, names: set[str] | None) -> tuple[str, str]:
    """The run directory on the instance and, when ``names``, its ``containers.jsonl`` ("" if none)."""
    from gpuorch.agent.protocol import CONTAINERS_FILE
    from gpuorch.runners import sftp_util

    run_dir: str = runner._run_path(sftp)
    if not names:
        return run_dir, ""
    try:
        data = sftp_util.read_file(sftp, runner._run_path(sftp, CONTAINERS_FILE), 0, CONTAINERS_MAX_BYTES)
    except FileNotFoundError:
        return run_dir, ""
    return run_dir, data.decode(errors="replace")


def _shell_runner(runner: Any) -> Any:
    """The runner whose instance holds the job's shell: a gang's first node (rank 0, where the
    job's checkpoints are made), the SSH runner inside an ``InImageRunner`` (the instance is the
    job's container)."""
    from gpuorch.provider.gang_cloud import GangRunner
    from gpuorch.runners.inimage import InImageRunner

    while isinstance(runner, GangRunner | InImageRunner):
        runner = runner.runners[0] if isinstance(runner, GangRunner) else runner.runner
    return runner


def _in_image(runner: Any) -> bool:
    """Whether the job's image is the instance itself (``InImageRunner``, a gang's nodes too): no
    container to enter."""
    from gpuorch.provider.gang_cloud import GangRunner
    from gpuorch.runners.inimage import InImageRunner

    while isinstance(runner, GangRunner):
        runner = runner.runners[0]
    return isinstance(runner, InImageRunner)

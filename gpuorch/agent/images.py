"""The container runtime on the instance: find it, make sure the job's image is there (pulling
it with the instance's own registry credentials), start the job's commands in it, clean up.

A missing image or a failed pull raises ``ContainerError`` carrying the runtime's own message:
the agent then fails the attempt (status ``failed``), which the daemon records as a failure in
``gpuorch events`` and never retries as if it were a preemption.

Stdlib only, Python 3.8 syntax: this module ships to instances with the agent.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, List, Mapping, Optional, Sequence

from gpuorch.agent.container import (
    ContainerConfig,
    container_env,
    container_name,
    inspect_argv,
    login_argv,
    parse_image,
    pull_argv,
    remove_argv,
    run_argv,
)
from gpuorch.agent.job import remove_containers, spawn_argv
from gpuorch.agent.protocol import CONTAINERS_FILE, AgentConfig

log = logging.getLogger("gpuorch.agent")

PULL_TIMEOUT_S = 1800.0  # a CUDA image is several GB
PROBE_TIMEOUT_S = 30.0
MESSAGE_CHARS = 2000  # of the runtime's output, in the error the daemon records


class ContainerError(RuntimeError):
    """The job's image cannot be run here; the message is the runtime's own."""


def _run(argv: Sequence[str], timeout: float, stdin: Optional[bytes] = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, check=False)


def _tail(output: bytes) -> str:
    """The runtime's own words: its final ``Error...`` line when it printed one (podman and docker
    log retries before it), else the end of its output."""
    lines = [line.strip() for line in output.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]
    text = errors[-1] if errors else "\n".join(lines)
    return text[-MESSAGE_CHARS:] or "no output"


def detect_runtime() -> List[str]:
    """``docker`` where its engine answers (``docker info``), else ``podman`` when installed."""
    if shutil.which("docker"):
        try:
            if _run(["docker", "info"], PROBE_TIMEOUT_S).returncode == 0:
                return ["docker"]
        except (OSError, subprocess.SubprocessError):
            pass
    if shutil.which("podman"):
        return ["podman"]
    raise ContainerError("no container runtime on this instance: neither a docker engine nor podman answers; "
                         "use an image with one (docs/workloads.md)")


def has_nvidia_gpus() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    try:
        done = _run(["nvidia-smi", "-L"], PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and b"GPU " in done.stdout


class ImageHost:
    """The runtime, with the image present; one per agent."""

    def __init__(self, config: ContainerConfig, rundir: Path, gpus: bool) -> None:
        self.config, self.rundir, self.gpus = config, rundir, gpus
        self.names: List[str] = []

    @classmethod
    def prepare(cls, config: ContainerConfig, rundir: Path) -> ImageHost:
        """Resolve the runtime and GPUs, then inspect the image and pull it if absent.

        Raises ContainerError with the runtime's message when it cannot be had."""
        try:
            ref = parse_image(config.image)
        except ValueError as e:
            raise ContainerError(str(e)) from None
        runtime = list(config.runtime) or detect_runtime()
        config = ContainerConfig(image=config.image, runtime=runtime, run_args=list(config.run_args), gpus=config.gpus,
                                 login=config.login)
        gpus = config.gpus == "all" or (config.gpus == "auto" and has_nvidia_gpus())
        host = cls(config, rundir, gpus)
        try:
            if _run(inspect_argv(config), PROBE_TIMEOUT_S).returncode == 0:
                log.info("image %s is present", config.image)
                return host
            host._login(ref.registry)
            log.info("pulling image %s", config.image)
            done = _run(pull_argv(config), PULL_TIMEOUT_S)
        except FileNotFoundError:
            raise ContainerError(f"container runtime {runtime[0]!r} is not installed on this instance") from None
        except subprocess.TimeoutExpired:
            raise ContainerError(f"pulling image {config.image} took over {PULL_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            raise ContainerError(f"cannot pull image {config.image}: {_tail(done.stdout)}")
        return host

    def _login(self, registry: Optional[str]) -> None:
        """Log the runtime in to ``registry`` as the config's ``login`` says (its provider's
        command printing a token from the instance's identity); nothing for another registry.
        Best effort: without the command (or a role) the pull's own error says what failed."""
        how = self.config.login
        if how is None or registry is None or how.registry != registry:
            return
        argv, username = list(how.token_argv), how.username
        if not argv:
            return
        if not shutil.which(argv[0]):
            log.warning("no %s on this instance: pulling from %s without logging in", argv[0], registry)
            return
        try:
            token = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=PROBE_TIMEOUT_S,
                                   check=False)
            if token.returncode != 0:
                log.warning("%s could not get a token for %s: %s", argv[0], registry, _tail(token.stderr))
                return
            login = login_argv(self.config.runtime, registry, username)
            done = _run(login, PROBE_TIMEOUT_S, stdin=token.stdout.strip())
        except (OSError, subprocess.SubprocessError) as e:
            log.warning("logging in to %s failed: %s", registry, e)
            return
        if done.returncode != 0:  # never log the token: only the runtime's answer
            log.warning("login to %s failed: %s", registry, _tail(done.stdout))

    def spawn(self, agent: AgentConfig, phase: str, command: str, env: Mapping[str, str], own: Iterable[str],
              mounts: Sequence[str], workdir: Path, log_path: Path) -> subprocess.Popen:
        """Start one of the job's commands in a fresh container (a leftover of the same name,
        from an agent that died, is removed first)."""
        name = container_name(agent.job_id, agent.attempt, phase, int(env.get("GPUORCH_NODE_RANK", "0") or 0),
                              agent.installation)
        self._record(name)
        _run(remove_argv(self.config.runtime, name), PROBE_TIMEOUT_S)
        inside = container_env(env, own)
        # ``setup`` runs first in the same container: what it installs must be there for ``run``.
        setup = agent.setup if phase == "running" else None
        argv = run_argv(self.config, name=name, command=command, env=inside, mounts=mounts, setup=setup,
                        workdir=str(workdir.resolve()), gpus=self.gpus, signal=agent.signal,
                        labels={"gpuorch.job": str(agent.job_id), "gpuorch.attempt": str(agent.attempt),
                                **({"gpuorch.installation": agent.installation} if agent.installation else {})})
        client = dict(os.environ)
        client.update(inside)  # ``--env NAME`` reads the value from here
        return spawn_argv(argv, workdir, client, log_path)

    def _record(self, name: str) -> None:
        if name in self.names:
            return
        self.names.append(name)
        with open(self.rundir / CONTAINERS_FILE, "a") as f:
            f.write(json.dumps({"runtime": self.config.runtime, "name": name}) + "\n")

    def remove_all(self) -> None:
        remove_containers(self.rundir)

"""Running the job's commands inside a container image (spec ``image:``): pure argv builders.

The agent stays outside the container, so notices, uploads and the dead-man switch work as
without an image; only ``setup`` and ``run`` execute inside. Every function here returns an
argument list for ``subprocess`` (never a shell string), so no job value is ever parsed by a
shell on the host; the job's own command is handed to the container's ``/bin/sh`` as an
argument (``sh -c SCRIPT gpuorch-job COMMAND``), not spliced into the script.

- Paths are bind-mounted at the same path inside the container, so ``GPUORCH_CHECKPOINT_DIR``,
  ``GPUORCH_RESULT_FILE``, ``GPUORCH_VOLUME_DIR`` and the working directory mean the same inside
  and out.
- The job's environment is passed as ``--env NAME`` (the runtime reads the value from its own
  environment): values never appear on a command line or in a file.
- The container's PID 1 is ``SIGNAL_PROXY``: the runtime client forwards the agent's signal to
  it (``--sig-proxy``, on by default) and it passes the signal to every process of the job, as
  the agent's ``killpg`` does without a container.

Stdlib only, Python 3.8 syntax: this module ships to instances with the agent.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

# PID 1 inside the container: start the job, forward USR1/USR2/TERM/INT/HUP to every process
# in the container (kill -1 from PID 1 reaches all but itself), and exit with the job's status
# once it is really gone (a trapped signal interrupts ``wait`` with 128+N while the job runs on).
# The checkpoint signal ($2, number $3) goes where ``gpuorch.agent.job.notify_job`` sends it
# outside a container: to every process that catches it, and to those that do not unless a
# descendant does (a launcher such as torchrun would die of it, and take its workers along).
# The job's shell ($1, run by sh -c) traps that signal as a no-op first, as the agent's bash
# does: in ``cd src && python train.py`` the shell would otherwise die of it. The job's
# ``setup`` ($4, if any) runs before it in the same container, so what it installs is there.
SIGNAL_PROXY = """\
notify() {
  all=""; catch=" "; spared=" "
  for d in /proc/[0-9]*; do
    p=${d#/proc/}; [ "$p" = 1 ] && continue
    m=""; pp=""
    { while read -r k v rest; do case $k in SigCgt:) m=$v;; PPid:) pp=$v;; esac; done < "$d/status"; } 2>/dev/null
    [ -n "$m" ] || continue
    all="$all $p:$pp"
    [ $(( 0x$m >> ($2 - 1) & 1 )) = 1 ] && catch="$catch$p "
  done
  for c in $catch; do
    p=$c
    while :; do
      pp=""; for e in $all; do [ "${e%%:*}" = "$p" ] && { pp=${e#*:}; break; }; done
      case "$pp" in ""|0|1) break;; esac
      spared="$spared$pp "; p=$pp
    done
  done
  for e in $all; do
    p=${e%%:*}
    case "$catch" in *" $p "*) kill -s "$1" "$p" 2>/dev/null; continue;; esac
    case "$spared" in *" $p "*) continue;; esac
    kill -s "$1" "$p" 2>/dev/null
  done
}
for s in USR1 USR2 TERM INT HUP; do trap "kill -s $s -1 2>/dev/null" "$s"; done
trap "notify $2 $3" "$2"
if [ -n "$4" ]; then /bin/sh -c "$4" || exit $?; fi
/bin/sh -c "trap : $2
$1" &
pid=$!
while :; do
  wait "$pid"; rc=$?
  kill -0 "$pid" 2>/dev/null || exit "$rc"
done
"""

# The grammar of github.com/distribution/reference (what docker and podman accept).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
MAX_NAME = 255


@dataclass(frozen=True)
class ImageRef:
    """A parsed image reference: ``[registry/]path[:tag][@digest]``."""

    registry: Optional[str]  # None: the runtime's default registry (docker.io)
    path: str
    tag: Optional[str] = None
    digest: Optional[str] = None


def parse_image(ref: str) -> ImageRef:
    """Parse an image reference as docker and podman do; ValueError saying what is wrong.

    The first component is a registry when it has a dot or a port, or is ``localhost``
    (``ghcr.io/org/img:1``, ``localhost/base``, ``127.0.0.1:5000/x``), else part of the path.
    """
    text = str(ref).strip()
    if not text:
        raise ValueError("empty image reference; write one like pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    m = _REFERENCE.match(text)
    if m is None:
        raise ValueError(f"cannot parse image reference {text!r}; write [REGISTRY/]NAME[:TAG][@sha256:DIGEST] "
                         "with a lowercase name, like ghcr.io/org/train:1.2")
    domain, path = m.group("domain"), m.group("path")
    if domain is not None and not ("." in domain or ":" in domain or domain == "localhost"):
        path, domain = f"{domain}/{path}", None  # "org/img": a Docker Hub namespace, not a host
        if not re.fullmatch(rf"{_COMPONENT}(?:/{_COMPONENT})*", path):
            raise ValueError(f"cannot parse image reference {text!r}: repository names are lowercase")
    name_len = len(path) + (len(domain) + 1 if domain else 0)
    if name_len > MAX_NAME:
        raise ValueError(f"image reference {text!r} is too long: the name is {name_len} characters, at most {MAX_NAME}")
    return ImageRef(domain, path, m.group("tag"), m.group("digest"))


@dataclass
class RegistryLogin:
    """How the instance logs its container runtime in to ``registry`` before a pull, with its own
    cloud identity: run ``token_argv`` (it prints a short-lived token), then ``login`` as
    ``username`` with that token on stdin (the command runs in the agent's environment).
    Handed to the agent by the instance's provider (``Provider.registry_login``): the agent runs
    what it is given and knows no cloud's name or CLI."""

    registry: str
    token_argv: List[str]
    username: str


@dataclass
class ContainerConfig:
    """How the agent runs the job in a container (part of ``AgentConfig``).

    ``runtime``: the argv prefix of the runtime client (``["docker"]``, or ``["podman",
    "--runtime", "runc"]`` with global flags); empty: ``docker`` where its engine answers, else
    ``podman``. ``run_args``: extra ``run`` flags the host needs (ulimits...). ``gpus``:
    ``auto`` (all GPUs when ``nvidia-smi`` finds any), ``all`` or ``none``. ``login``: how to
    log in to the image's registry first (None: pull without logging in).
    """

    image: str
    runtime: List[str] = field(default_factory=list)
    run_args: List[str] = field(default_factory=list)
    gpus: str = "auto"
    login: Optional[RegistryLogin] = None

    def __post_init__(self) -> None:
        if isinstance(self.login, dict):  # read back from the agent's JSON config
            self.login = RegistryLogin(**self.login)


def runtime_name(runtime: Sequence[str]) -> str:
    """``docker`` or ``podman`` (by the executable's name); others count as docker-compatible."""
    exe = runtime[0].rsplit("/", 1)[-1] if runtime else "docker"
    return "podman" if exe.startswith("podman") else "docker"


def gpu_args(runtime: Sequence[str], gpus: bool) -> List[str]:
    """Flags giving the container all of the host's NVIDIA GPUs: docker's ``--gpus all`` (the
    NVIDIA container toolkit's hook), podman's CDI device ``nvidia.com/gpu=all`` (the toolkit's
    ``nvidia-ctk cdi generate`` spec); none without GPUs."""
    if not gpus:
        return []
    if runtime_name(runtime) == "podman":
        return ["--device", "nvidia.com/gpu=all", "--security-opt", "label=disable"]
    return ["--gpus", "all"]


def container_name(job_id: int, attempt: int, phase: str, node_rank: int = 0,
                   installation: Optional[str] = None) -> str:
    """One name per (installation, job, attempt, phase, node): a restarted agent finds its
    container by it (and removes a leftover of that name first). The installation id keeps two
    daemons on one host apart: job ids start at 1 in each, and an agent of one removed the other's
    running container of the same job and attempt."""
    suffix = f"-n{node_rank}" if node_rank else ""
    owner = f"{installation[:12]}-" if installation else ""
    return f"gpuorch-{owner}{job_id}-{attempt}-{phase}{suffix}"


def run_argv(
    config: ContainerConfig,
    *,
    name: str,
    command: str,
    env: Mapping[str, str],
    mounts: Sequence[str],
    workdir: str,
    gpus: bool,
    signal: str = "SIGUSR1",
    setup: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
) -> List[str]:
    """The full ``run`` command line for one of the job's commands.

    ``env``: the variables the job gets, passed by name only (the caller puts the same mapping
    into the runtime client's environment). ``mounts``: host directories, each bind-mounted at
    its own path. ``signal``: the checkpoint signal, which the job's shell survives. ``setup``:
    run first, in the same container (a separate one would lose what it installs).
    ``--network host``: a job reaches what its instance reaches (rendezvous, object stores) and
    torchrun's ``MASTER_ADDR`` means the same inside. ``--ipc host``:
    PyTorch's data loader workers share memory through /dev/shm, which a container caps at 64 MB.
    """
    argv = list(config.runtime or ["docker"]) + ["run", "--rm", "--name", name, "--network", "host", "--ipc", "host"]
    for key, value in sorted((labels or {}).items()):
        argv += ["--label", f"{key}={value}"]
    for key in sorted(env):
        argv += ["--env", key]
    for path in _unique(mounts):
        argv += ["--volume", f"{path}:{path}"]
    argv += ["--workdir", workdir]
    argv += gpu_args(config.runtime, gpus)
    argv += list(config.run_args)
    trapped = signal.upper()[3:] if signal.upper().startswith("SIG") else signal.upper()
    if not re.fullmatch(r"[A-Z0-9]+", trapped):  # the spec allows only signal names; never shell text
        raise ValueError(f"signal {signal!r} is not a signal name")
    number = getattr(_signal.Signals, f"SIG{trapped}", None)
    if number is None:
        raise ValueError(f"signal {signal!r} is not a signal name")
    argv += ["--entrypoint", "/bin/sh", config.image, "-c", SIGNAL_PROXY, "gpuorch-job", command, trapped,
             str(int(number)), setup or ""]
    return argv


def inspect_argv(config: ContainerConfig) -> List[str]:
    """Succeeds (exit 0) when the image is present on the host."""
    return list(config.runtime or ["docker"]) + ["image", "inspect", config.image]


def pull_argv(config: ContainerConfig) -> List[str]:
    return list(config.runtime or ["docker"]) + ["pull", config.image]


def remove_argv(runtime: Sequence[str], name: str) -> List[str]:
    """Kill and remove a container by name; a no-op (non-zero exit, ignored) when it is gone."""
    return list(runtime or ["docker"]) + ["rm", "--force", name]


def login_argv(runtime: Sequence[str], registry: str, username: str) -> List[str]:
    """``login`` reading the password from stdin (never on a command line)."""
    return list(runtime or ["docker"]) + ["login", "--username", username, "--password-stdin", registry]


def container_env(job_env: Mapping[str, str], own: Iterable[str]) -> Dict[str, str]:
    """What the container gets of the agent's job environment: the job's own variables (``own``,
    the spec's ``env``) and every GPUORCH_* one; not the host's PATH, HOME or credentials."""
    names = set(own)
    return {k: v for k, v in job_env.items() if k in names or k.startswith("GPUORCH_")}


def _unique(paths: Sequence[str]) -> List[str]:
    """Distinct paths, dropping any under another one (mounting both would shadow nothing new)."""
    out: List[str] = []
    for p in sorted({str(p).rstrip("/") or "/" for p in paths}):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out

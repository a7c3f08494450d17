"""``gpuorch ssh``: a command or an interactive shell on a running job or dev box.

Every session runs ``keepalive.session_command`` on the box: it marks the session open (a dev
box is not idle while one is) and starts in the job's working directory.

- A command (``run``) goes over paramiko: its output streams to ours, stdin is not forwarded,
  and its exit status is returned (255 when the connection drops before it ends, as ssh does).
- An interactive shell (``interactive_argv``) execs the system ``ssh`` with the daemon's key and
  the installation's known_hosts, ``StrictHostKeyChecking=yes`` (an unknown or changed host key
  is refused), and nothing from ``~/.ssh/config`` or the agent: ``-F /dev/null``, ``IdentitiesOnly``.
- On a ``LocalEndpoint`` both run ``/bin/sh`` on this host in the run directory.
- An endpoint that names the job's container (a job with an ``image:``) runs the session in it:
  ``<runtime> exec -i [-t] <container> /bin/sh -c <session>`` on the instance, built as a list
  and ``shlex.quote``d element by element (``-t`` only where the session has a terminal). The
  session's marker is made inside the container, so a dev box's keepalive (which runs there, in
  the container's process namespace) sees its pid; the run directory is mounted at the same path.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from typing import BinaryIO

from gpuorch.devbox.keepalive import session_command
from gpuorch.devbox.remote import WORK_DIR, Container, Endpoint, LocalEndpoint, SshEndpoint

CONNECTION_LOST = 255  # what ssh returns when the session ends without an exit status
_CHUNK = 65536


def remote_line(ep: Endpoint, argv: list[str] | None, tty: bool = False) -> str:
    """The command line the box's shell runs for ``argv`` (None: a login shell); ``tty``: the
    session may have a terminal (the interactive shell)."""
    command = shlex.join(argv) if argv else None
    run_dir = str(ep.run_dir)
    line = session_command(run_dir, f"{run_dir}/{WORK_DIR}", command)
    return line if ep.container is None else container_line(ep.container, line, tty)


def container_line(c: Container, inner: str, tty: bool) -> str:
    """``inner`` (a command line for ``/bin/sh -c``) run in the container ``c``, every element
    quoted. ``tty``: with ``-t`` when the session's stdin is a terminal (the runtimes refuse
    ``-t`` without one: "the input device is not a TTY")."""
    head, tail = [*c.runtime, "exec", "-i"], [c.name, "/bin/sh", "-c", inner]
    plain = f"exec {shlex.join(head + tail)}"
    if not tty:
        return plain
    return f"if [ -t 0 ]; then exec {shlex.join(head + ['-t'] + tail)}; else {plain}; fi"


def run(ep: Endpoint, argv: list[str], out: BinaryIO | None = None, err: BinaryIO | None = None) -> int:
    """Run ``argv`` on the endpoint; its output to ``out`` and ``err`` (ours by default); its exit code."""
    out = out or sys.stdout.buffer
    err = err or sys.stderr.buffer
    line = remote_line(ep, argv)
    if isinstance(ep, LocalEndpoint):
        done = subprocess.run(["/bin/sh", "-c", line], stdout=out, stderr=err, stdin=subprocess.DEVNULL, check=False)
        return done.returncode
    client = ep.connect()
    try:
        transport = client.get_transport()
        assert transport is not None  # connect returns a connected client
        channel = transport.open_session()
        with channel:
            channel.exec_command(line)
            channel.shutdown_write()
            while True:
                got = False
                if channel.recv_ready():
                    out.write(channel.recv(_CHUNK))
                    got = True
                if channel.recv_stderr_ready():
                    err.write(channel.recv_stderr(_CHUNK))
                    got = True
                if not got and channel.exit_status_ready() and not channel.recv_ready() \
                        and not channel.recv_stderr_ready():
                    break
                if not got:
                    channel.status_event.wait(0.05)
            out.flush()
            err.flush()
            status = channel.recv_exit_status()
            return status if status >= 0 else CONNECTION_LOST
    finally:
        client.close()


def interactive_argv(ep: Endpoint) -> list[str]:
    """The argv to exec for an interactive shell on the endpoint (a list: never a shell string)."""
    line = remote_line(ep, None, tty=True)
    if isinstance(ep, LocalEndpoint):
        return ["/bin/sh", "-c", line]
    assert isinstance(ep, SshEndpoint)
    return ["ssh", "-F", "/dev/null", "-t", "-p", str(ep.port), "-i", str(ep.key_path),
            "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={ep.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-l", ep.user, ep.host, line]

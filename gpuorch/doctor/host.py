"""Doctor checks of this host: SSH key permissions and the metrics port."""

from __future__ import annotations

import errno
import os
import socket
import stat
import urllib.request
from collections.abc import Iterator

from gpuorch.doctor.context import Context
from gpuorch.doctor.findings import Finding


def check_ssh_keys(ctx: Context) -> Iterator[Finding]:
    """Private keys under ``$GPUORCH_HOME/keys`` must be the daemon user's, mode 0600 (or
    stricter), in a directory only that user can enter: ssh refuses looser keys."""
    if ctx.config is None:
        return
    keys = ctx.config.home / "keys"
    if not keys.is_dir():
        yield Finding.ok("ssh keys", f"no {keys} (no SSH provider has created keys yet)")
        return
    bad = False
    mode = stat.S_IMODE(keys.stat().st_mode)
    if mode & 0o077:
        bad = True
        yield Finding.fail("ssh keys", f"{keys} is mode {mode:04o}; others can list the keys", f"chmod 700 {keys}")
    count = 0
    for path in sorted(keys.iterdir()):
        if path.suffix == ".pub" or not path.is_file():
            continue
        count += 1
        st = path.stat()
        if st.st_uid != os.getuid():
            bad = True
            yield Finding.fail("ssh keys", f"{path} belongs to uid {st.st_uid}, not to this user ({os.getuid()})",
                               f"chown {os.getuid()} {path}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            bad = True
            mode = stat.S_IMODE(st.st_mode)
            yield Finding.fail("ssh keys", f"{path} is mode {mode:04o}; ssh refuses keys others can read",
                               f"chmod 600 {path}")
    if not bad:
        yield Finding.ok("ssh keys", f"{count} private key(s) in {keys}, mode 0600 or stricter")


def check_metrics_port(ctx: Context) -> Iterator[Finding]:
    """The configured metrics address can be bound, or a gpuorch daemon already serves there."""
    if ctx.config is None:
        return
    m = ctx.config.metrics
    if not m.enabled:
        yield Finding.ok("metrics", "disabled (metrics.enabled: false)")
        return
    if m.port == 0:
        yield Finding.ok("metrics", f"any free port on {m.host} (metrics.port: 0)")
        return
    err = _bind_error(m.host, m.port)
    if err is None:
        yield Finding.ok("metrics", f"{m.host}:{m.port} is free for the daemon's /metrics")
    elif err == errno.EADDRINUSE and _serves_gpuorch(m.url):
        yield Finding.ok("metrics", f"a gpuorch daemon serves {m.url}")
    elif err == errno.EADDRINUSE:
        yield Finding.fail("metrics", f"{m.host}:{m.port} is taken by another program",
                           "set metrics.port to a free port (or metrics.enabled: false)")
    else:
        yield Finding.fail("metrics", f"cannot listen on {m.host}:{m.port}: {os.strerror(err)}",
                           "set metrics.host to an address of this host (127.0.0.1 by default)")


def _bind_error(host: str, port: int) -> int | None:
    """errno of binding ``host:port`` the way the metrics server does, or None if it binds."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return errno.EADDRNOTAVAIL
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is not "taken"
        try:
            s.bind(addr)
        except OSError as e:
            return e.errno or errno.EADDRINUSE
    return None


def _serves_gpuorch(url: str) -> bool:
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        with opener.open(url, timeout=3) as r:
            return b"gpuorch_reconcile_pass_duration_seconds" in r.read(1 << 20)
    except OSError:
        return False

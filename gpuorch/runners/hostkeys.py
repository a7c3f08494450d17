"""Pinned SSH host keys: one OpenSSH ``known_hosts`` file per installation.

The SSH runner connects only to hosts whose key is pinned here and refuses any other key
(``HostKeyRejected``). Keys are pinned from a trusted source, never from the first connection:
the daemon generates each instance's host key and pins its public half before connecting
(``gpuorch.runners.keys.ensure_host_key``; docs/ssh.md has the reasoning and the alternatives).

Stdlib only. Writers take an exclusive ``flock`` on ``<file>.lock`` and replace the file
atomically, so concurrent daemons and CLI processes never tear or lose each other's pins.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

from gpuorch.agent.protocol import write_atomic
from gpuorch.runners.port import RunnerUnavailable

KNOWN_HOSTS = "known_hosts"  # under $GPUORCH_HOME
KEY_TYPES = frozenset({
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa",
})


class HostKeyRejected(RunnerUnavailable):
    """The host offered a key that is not pinned for its address (unknown or changed).

    Never retried automatically: it means a man in the middle, or an address whose pin is
    missing or stale, which only the provider (the trusted source) can fix by pinning.
    """


def known_hosts_path(home: Path) -> Path:
    return Path(home) / KNOWN_HOSTS


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names an address: ``host`` on port 22, ``[host]:port`` elsewhere."""
    return host if int(port) == 22 else f"[{host}]:{int(port)}"


def parse_public_key(public_key: str) -> tuple[str, str]:
    """``"ssh-ed25519 AAAA... comment"`` -> ``(key type, base64 blob)``; ValueError if malformed."""
    fields = public_key.split()
    if len(fields) < 2 or fields[0] not in KEY_TYPES:
        raise ValueError(f"not an OpenSSH public key line: {public_key[:40]!r}…; expected 'ssh-ed25519 AAAA...'")
    key_type, blob = fields[0], fields[1]
    try:
        raw = base64.b64decode(blob, validate=True)
        (length,) = struct.unpack(">I", raw[:4])
        embedded = raw[4:4 + length].decode()
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise ValueError(f"public key {key_type} {blob[:16]}… is not valid base64 key data") from None
    if embedded != key_type:
        raise ValueError(f"public key says {key_type} but its data is a {embedded!r} key")
    return key_type, blob


def fingerprint(public_key: str) -> str:
    """The ``SHA256:...`` fingerprint ``ssh-keygen -l`` prints, for messages and logs."""
    _, blob = parse_public_key(public_key)
    digest = hashlib.sha256(base64.b64decode(blob)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def pinned_host_key(known_hosts: Path, host: str, port: int) -> str | None:
    """The ``"<type> <base64>"`` pinned for ``host:port``, or None."""
    pattern = host_pattern(host, port)
    for line in _lines(Path(known_hosts)):
        fields = line.split()
        if len(fields) >= 3 and pattern in fields[0].split(","):
            return f"{fields[1]} {fields[2]}"
    return None


def pinned_host_keys(known_hosts: Path, host: str, port: int) -> list[str]:
    """Every ``"<type> <base64>"`` pinned for ``host:port`` (at most one per key type), in file order."""
    pattern = host_pattern(host, port)
    return [f"{f[1]} {f[2]}" for f in (line.split() for line in _lines(Path(known_hosts)))
            if len(f) >= 3 and pattern in f[0].split(",")]


def pin_host_keys(known_hosts: Path, host: str, port: int, public_keys: list[str]) -> list[str]:
    """Pin exactly ``public_keys`` (OpenSSH public key lines, at most one per key type) for
    ``host:port``, replacing whatever was pinned there; return the keys it replaced.

    For an instance whose trusted source names several host keys (e.g. GCE's guest attributes
    list one per type): the client accepts the host if it offers any of them, and prefers the
    first key's type. Same caveats as ``pin_host_key``. ValueError for a malformed key, a
    repeated key type, or no key at all.
    """
    parsed = [parse_public_key(k) for k in public_keys]
    types = [t for t, _ in parsed]
    if not parsed or len(set(types)) != len(types):
        raise ValueError(f"pin_host_keys needs one key per key type, got {types or 'none'}")
    pattern = host_pattern(host, port)
    path = Path(known_hosts)
    wanted = [f"{t} {b}" for t, b in parsed]
    with _locked(path):
        previous = pinned_host_keys(path, host, port)
        if previous == wanted:
            return previous
        kept = [line for line in _lines(path) if pattern not in line.split()[0].split(",")]
        write_atomic(path, "".join(f"{line}\n" for line in [*kept, *(f"{pattern} {k}" for k in wanted)]))
        return previous


def pin_host_key(known_hosts: Path, host: str, port: int, public_key: str) -> str | None:
    """Pin ``public_key`` (an OpenSSH public key line) for ``host:port``; return the key it replaced.

    The caller vouches that the key comes from a trusted source (the daemon generated it, or
    the cloud reported it out of band). A different key pinned earlier for the same address —
    a former instance at a reused IP — is replaced; connections themselves never change a pin.
    Idempotent. Raises ValueError for a malformed key.
    """
    key_type, blob = parse_public_key(public_key)
    pattern = host_pattern(host, port)
    path = Path(known_hosts)
    with _locked(path):
        previous = pinned_host_key(path, host, port)
        if previous == f"{key_type} {blob}":
            return previous
        kept = [line for line in _lines(path) if pattern not in line.split()[0].split(",")]
        write_atomic(path, "".join(f"{line}\n" for line in [*kept, f"{pattern} {key_type} {blob}"]))
        return previous


def unpin_host_key(known_hosts: Path, host: str, port: int) -> None:
    """Forget the pin for ``host:port`` (the instance is gone); quiet if there is none."""
    pattern = host_pattern(host, port)
    path = Path(known_hosts)
    with _locked(path):
        lines = _lines(path)
        kept = [line for line in lines if pattern not in line.split()[0].split(",")]
        if kept != lines:
            write_atomic(path, "".join(f"{line}\n" for line in kept))


def _lines(path: Path) -> list[str]:
    """Entry lines of a known_hosts file (comments and blanks dropped); [] if it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # closing the file releases the lock

"""SSH key material the daemon makes for its instances, kept under ``$GPUORCH_HOME/keys/``.

Per job, in ``keys/job-<id>/`` (directory 0700, private files 0600, never in the database):

- ``id_ed25519`` (+ ``.pub``): the job's login key. The provider puts the public half in the
  instance's authorized keys (user data); the SSH runner logs in with the private half.
- ``host-<attempt>_ed25519`` (+ ``.pub``): the host key of that attempt's instance. The daemon
  generates it and hands it to the instance in its user data (``cloud_config_ssh``), and pins
  the public half (``gpuorch.runners.hostkeys.pin_host_key``) before the first connection, so
  there is no trust-on-first-use window. See docs/ssh.md.

Both are OpenSSH-format ed25519 keys made with ``cryptography`` (paramiko cannot generate them).
``cryptography`` is imported only to make or read a key: the daemon, which only deletes them,
does not load OpenSSL for that. Creation is race-free: a key is written to a private temp file
and hard-linked into place, so two processes asking at once end up with the same key.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

KEYS_DIR = "keys"


def job_key_dir(home: Path, job_id: int) -> Path:
    return Path(home) / KEYS_DIR / f"job-{int(job_id)}"


def ensure_job_key(home: Path, job_id: int) -> tuple[Path, str]:
    """The job's login key pair, created on first call: ``(private key path, public key line)``.

    The public line is ``ssh-ed25519 AAAA... gpuorch-job-<id>`` (authorized_keys format).
    Idempotent; safe to call concurrently from several processes.
    """
    path = job_key_dir(home, job_id) / "id_ed25519"
    return path, _ensure_key(path, f"gpuorch-job-{int(job_id)}")


def ensure_host_key(home: Path, job_id: int, attempt: int) -> tuple[str, str]:
    """The host key pair for the instance of ``attempt``: ``(private OpenSSH PEM, public line)``.

    Created on first call and then stable, so a launch retried with the same client token
    renders the same user data. Pin the public line for the instance's address before connecting.
    """
    path = job_key_dir(home, job_id) / f"host-{int(attempt)}_ed25519"
    public = _ensure_key(path, f"gpuorch-host-{int(job_id)}-{int(attempt)}")
    return path.read_text(), public


def delete_job_keys(home: Path, job_id: int) -> None:
    """Forget every key of a finished job (its instances are gone); quiet if there are none."""
    shutil.rmtree(job_key_dir(home, job_id), ignore_errors=True)


def cloud_config_ssh(host_private: str, host_public: str, authorized_key: str) -> dict[str, Any]:
    """The cloud-init (``#cloud-config``) settings that install a host key and a login key.

    Merge the result into the instance's cloud-config. ``ssh_deletekeys`` drops any host key
    baked into the image and ``ssh_genkeytypes: []`` stops cloud-init from making new ones, so
    the instance offers only the host key the daemon pinned.
    """
    return {
        "ssh_deletekeys": True,
        "ssh_genkeytypes": [],
        "ssh_keys": {"ed25519_private": host_private, "ed25519_public": host_public},
        "ssh_authorized_keys": [authorized_key],
    }


def public_key_line(private_path: Path, comment: str = "") -> str:
    """The OpenSSH public key line of an (unencrypted) OpenSSH private key file."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(Path(private_path).read_bytes(), password=None)
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{line.decode()} {comment}".strip()


def _ensure_key(path: Path, comment: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600 from the start
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # fails if another process got there first: theirs wins
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    public = public_key_line(path, comment)  # derived from the private key: a stale .pub cannot lie
    pub_path = path.with_name(path.name + ".pub")
    if not pub_path.exists() or pub_path.read_text().strip() != public:
        pub_path.write_text(public + "\n")
    return public


def key_job_ids(home: Path) -> list[int]:
    """The jobs that have a key directory under ``home`` (for the sweep of keys nobody needs)."""
    root = Path(home) / KEYS_DIR
    if not root.is_dir():
        return []
    return sorted(int(p.name[4:]) for p in root.iterdir() if p.name.startswith("job-") and p.name[4:].isdigit())

"""An instance as a directory: the kit the ``local`` and ``sim`` adapters share.

An instance is ``<home>/instances/<id>/`` (``instances``: its record and lock) whose agent and
job run as process groups of their own (``procs``), driven by ``LocalRunner`` (``runner``);
``capacity`` makes markets run out; ``shutdown`` is the instance's own "power off". Neither
adapter imports the other: what both need lives here.
"""

from __future__ import annotations

import hashlib
import re

from gpuorch.provider.localdir.instances import REASON_TERMINATED, InstanceDir, Meta
from gpuorch.provider.localdir.procs import spawn_detached
from gpuorch.provider.localdir.runner import LocalRunner

__all__ = ["REASON_TERMINATED", "InstanceDir", "LocalRunner", "Meta", "instance_id_for", "spawn_detached"]

_TOKEN_BODY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,100}")


def instance_id_for(client_token: str, prefix: str = "local") -> str:
    """The instance id a launch with ``client_token`` gets: ``gpuorch-7-2`` -> ``local-7-2``.

    Deriving the id from the token is what makes launch idempotent: the second launch finds the
    first one's directory. Tokens that are not path-safe are hashed. Each provider built on
    these instances uses its own ``prefix`` (``sim``).
    """
    body = client_token.removeprefix("gpuorch-")
    if not _TOKEN_BODY.fullmatch(body):
        body = hashlib.sha256(client_token.encode()).hexdigest()[:16]
    return f"{prefix}-{body}"

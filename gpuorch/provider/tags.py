"""The tags and client token that let every resource an adapter creates be found again.

After a crash an adapter looks for its attempt's resource (by tag or by the token in its name)
before creating another; the orphan sweep ends tagged resources that no live attempt owns.
"""

from __future__ import annotations

import hashlib
import re

TAG_MANAGED = "gpuorch:managed"
TAG_JOB = "gpuorch:job"
TAG_ATTEMPT = "gpuorch:attempt"
TAG_OWNER = "gpuorch:owner"  # the installation (state store) the resource belongs to
TAG_NODE = "gpuorch:node"  # "<rank>-of-<nodes>" on each instance of a multi-node gang (spec ``nodes:``)


def managed_tags(job_id: int, attempt: int, owner: str = "") -> dict[str, str]:
    tags = {TAG_MANAGED: "true", TAG_JOB: str(job_id), TAG_ATTEMPT: str(attempt)}
    if owner:
        tags[TAG_OWNER] = owner
    return tags


_OWNER_IN_TOKEN = re.compile(r"[a-z0-9]{1,16}")
CLIENT_TOKEN_MAX = 64  # EC2's limit; the tightest of the clouds'


def client_token(job_id: int, attempt: int, owner: str = "") -> str:
    """Idempotency token of one launch: the same attempt can never get two instances.

    ``gpuorch-<owner>-<job>-<attempt>``: job ids and attempt numbers repeat across installations
    (each database counts from 1, a re-initialised one too), and a cloud account's tokens are
    shared by every installation using it; the owner (the installation id) keeps one
    installation from ever being handed another's instance. An owner that is not a short
    lowercase alphanumeric id is hashed. At most ``CLIENT_TOKEN_MAX`` ASCII characters.
    ``gpuorch-<job>-<attempt>`` without an owner (tests and tools only: the daemon always has one).
    """
    if not owner:
        token = f"gpuorch-{job_id}-{attempt}"
    else:
        key = owner if _OWNER_IN_TOKEN.fullmatch(owner) else hashlib.sha256(owner.encode()).hexdigest()[:16]
        token = f"gpuorch-{key}-{job_id}-{attempt}"
    if len(token) > CLIENT_TOKEN_MAX:  # absurd job or attempt numbers: still unique, still short
        token = f"gpuorch-{hashlib.sha256(token.encode()).hexdigest()[:48]}"
    return token

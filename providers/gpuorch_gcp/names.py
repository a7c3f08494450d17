"""Names and labels on GCE: pure translations (no SDK, no I/O), tested alone.

- Instance names: ``[a-z]([-a-z0-9]*[a-z0-9])?``, at most 63 characters, unique per zone. The
  name is derived from the launch's client token, so a repeated launch addresses the same VM
  (insert answers 409, or the same operation through ``requestId``).
- Labels: keys and values of lowercase letters, digits, ``_`` and ``-``, at most 63
  characters, keys starting with a letter. The port's tags (``gpuorch:job``...) become
  ``gpuorch-job``...; values that do not fit are refused (ours always fit: digits, ``true``,
  the installation id, which is 12 hex digits).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping

from gpuorch.provider.port import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_NODE, TAG_OWNER

NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_TOKEN_NAME = re.compile(r"gpuorch-(?:(?P<owner>[a-z0-9]{1,16})-)?(?P<job>\d+)-(?P<attempt>\d+)")
_REQUEST_NS = uuid.UUID("5b0e0c2e-8a4e-4f0b-9d59-3c1b1f6a0e11")  # gpuorch's requestId namespace


def instance_name(client_token: str) -> str:
    """The VM name of a launch: the token itself when it is a valid GCE name (the usual
    ``gpuorch-<owner>-<job>-<attempt>``), else ``gpuorch-`` and a hash of it (still unique)."""
    if NAME.fullmatch(client_token):
        return client_token
    return f"gpuorch-{hashlib.sha256(client_token.encode()).hexdigest()[:40]}"


def request_id(client_token: str) -> str:
    """``requestId`` of the launch's insert: a UUID derived from the token. GCE answers a repeat
    within 60 minutes with the first request's operation and creates nothing."""
    return str(uuid.uuid5(_REQUEST_NS, client_token))


def tags_from_name(name: str) -> dict[str, str]:
    """The tags a token-derived name spells (``gpuorch-<owner>-<job>-<attempt>``); empty for a
    hashed or foreign name. For a VM GCE deleted after preempting it: its labels are gone with it."""
    m = _TOKEN_NAME.fullmatch(name)
    if m is None:
        return {}
    tags = {TAG_MANAGED: "true", TAG_JOB: str(int(m["job"])), TAG_ATTEMPT: str(int(m["attempt"]))}
    if m["owner"]:
        tags[TAG_OWNER] = m["owner"]
    return tags


def label_key(tag: str) -> str:
    """``gpuorch:job`` -> ``gpuorch-job``; ValueError for a key GCE cannot carry."""
    key = tag.lower().replace(":", "-").replace("/", "-").replace(".", "_")
    if not LABEL_KEY.fullmatch(key):
        raise ValueError(f"tag {tag!r} cannot be a GCE label key (lowercase letters, digits, _ and -, at most 63)")
    return key


def labels_from_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The port's tags as GCE labels. ValueError for a value GCE would refuse, rather than a
    silently changed one that would never match again."""
    labels: dict[str, str] = {}
    for tag, value in tags.items():
        if not LABEL_VALUE.fullmatch(value):
            raise ValueError(f"tag {tag}={value!r} cannot be a GCE label value "
                             "(lowercase letters, digits, _ and -, at most 63)")
        labels[label_key(tag)] = value
    return labels


_KNOWN = {label_key(t): t for t in (TAG_MANAGED, TAG_JOB, TAG_ATTEMPT, TAG_OWNER, TAG_NODE)}


def tags_from_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """GCE labels back as the port's tags: gpuorch's own keys regain their ``:``; others as they are."""
    return {_KNOWN.get(k, k): v for k, v in labels.items()}


def label_filter(labels: Mapping[str, str]) -> str:
    """A list filter matching every label: ``labels.gpuorch-managed = "true" AND ...``."""
    return " AND ".join(f'labels.{k} = "{v}"' for k, v in sorted(labels.items()))


def last_segment(url: str) -> str:
    """``https://.../zones/us-central1-a/machineTypes/g2-standard-4`` -> ``g2-standard-4``."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def region_of(zone: str) -> str:
    """``us-central1-a`` -> ``us-central1``."""
    return zone.rsplit("-", 1)[0]


def disk_name(tags: Mapping[str, str]) -> str:
    """The persistent disk of a job's volume: ``gpuorch-<owner>-<job>-vol``, derived from its tags
    (job and installation) so a create repeated after a crash addresses the same disk (insert
    answers 409). ValueError without a job tag; a name that would not fit GCE's rule is hashed."""
    job, owner = tags.get(TAG_JOB), tags.get(TAG_OWNER, "")
    if not job:
        raise ValueError(f"a volume's tags need {TAG_JOB} (its disk is named after the job)")
    name = f"gpuorch-{owner}-{job}-vol" if owner else f"gpuorch-{job}-vol"
    if NAME.fullmatch(name):
        return name
    return f"gpuorch-{hashlib.sha256(name.encode()).hexdigest()[:40]}-vol"

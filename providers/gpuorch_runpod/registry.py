"""Private registries: the job's image pulled by RunPod with the user's registry credentials.

A pod is the job's container, pulled by RunPod itself, so the login rides in the launch, not in
the instance (the port's agent-side ``registry_login`` has nothing to do here). RunPod keeps
registry credentials in the account (GraphQL ``saveRegistryAuth(input: {name, username,
password}) { id name }``, ``updateRegistryAuth(input: {id, username, password})``, listed under
``myself { containerRegistryCreds { id name } }``; the official client's
runpod/api/mutations/container_register_auth.py and https://graphql-spec.runpod.io/) and a deploy
names one by ``containerRegistryAuthId`` (``PodFindAndDeployOnDemandInput``; the REST reference,
https://docs.runpod.io/api-reference/pods/POST/pods). RunPod never answers a password back.

The credentials of the image's registry come from the standard chain: the
option ``registries.<host>`` (a user name and the environment variable holding the password or
token), else the docker ``config.json`` (``auths``) (``gpuorch.provider.registry_creds``). They are
read at each launch, sent to RunPod only, kept in memory, and never logged or stored; the auth
RunPod keeps is named for the installation and the registry (``gpuorch-<owner>-<host>``), found
again by that name after a restart, and refreshed with the current secret once per process.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from gpuorch.errors import PermanentError
from gpuorch.provider.registry_creds import Credential

from . import documents as doc

log = logging.getLogger("gpuorch.runpod")
Query = Callable[..., dict[str, Any]]


def auth_name(owner: str, host: str) -> str:
    """The account-wide name of this installation's auth for ``host`` (RunPod wants it unique)."""
    return "gpuorch-" + re.sub(r"[^a-z0-9-]+", "-", f"{owner}-{host}".lower()).strip("-")[:80]


class RegistryAuths:
    """The RunPod registry auth for each registry this process launched from, by name."""

    def __init__(self, query: Query) -> None:
        self._query = query
        self._known: dict[str, tuple[str, str]] = {}  # name -> (auth id, digest of the secret sent)
        self._lock = threading.Lock()  # launches run on the daemon's launch pool: one save per name

    def auth_id(self, owner: str, cred: Credential) -> str:
        """The id of the auth holding ``cred``: found by its name (a restart, a crash between
        saving and deploying) and updated when this process has not sent this secret yet, else saved."""
        name = auth_name(owner, cred.host)
        digest = hashlib.sha256(f"{cred.username}\0{cred.password}".encode()).hexdigest()
        with self._lock:
            known = self._known.get(name)
            if known is not None and known[1] == digest:
                return known[0]
            auth = self._save(name, cred)
            self._known[name] = (auth, digest)
            return auth

    def _save(self, name: str, cred: Credential) -> str:
        data = self._query(doc.REGISTRY_AUTHS, what="list registry auths")
        found = next((a for a in (data.get("myself") or {}).get("containerRegistryCreds") or ()
                      if isinstance(a, dict) and a.get("name") == name and a.get("id")), None)
        if found is not None:
            body = {"input": {"id": str(found["id"]), "username": cred.username, "password": cred.password}}
            self._query(doc.UPDATE_REGISTRY_AUTH, body, what=f"update registry auth {name}")
            auth = str(found["id"])
        else:
            body = {"input": {"name": name, "username": cred.username, "password": cred.password}}
            made = self._query(doc.SAVE_REGISTRY_AUTH, body, what=f"save registry auth {name}").get("saveRegistryAuth")
            if not isinstance(made, dict) or not made.get("id"):
                raise PermanentError(f"runpod save registry auth {name}: the answer names no auth", code="Unparseable")
            auth = str(made["id"])
        log.info("runpod: registry auth %s (%s) holds the credentials for %s", auth, name, cred.host)
        return auth

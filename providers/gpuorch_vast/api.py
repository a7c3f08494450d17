"""Every call to Vast's API, through the official client's library layer (``vastai.api``).

``vastai`` 1.9 is more than a CLI: ``vastai.api.client.VastClient(api_key, server_url, retry)``
and the functions of ``vastai.api.offers`` / ``.instances`` / ``.billing`` build the documented
requests (``POST /api/v0/bundles/``, ``PUT /api/v0/asks/{id}/``, ``GET /api/v1/instances/``,
``GET|DELETE /api/v0/instances/{id}/``, ``GET /api/v0/users/current``, and the volumes':
``POST /api/v0/volumes/search/``, ``PUT|DELETE /api/v0/volumes/``, ``GET /api/v0/volumes``) and return parsed JSON;
``server_url`` points it at a local fake in tests. The client's own retry loop is switched off
(``retry=1``): gpuorch's one policy (``gpuorch.provider.retry``) retries 429 and 5xx, with the
errors translated by ``errors.translate``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gpuorch.provider import RetryPolicy, call_with_retries

from .errors import translate

log = logging.getLogger("gpuorch.vast")
T = TypeVar("T")
TIMEOUT_S = 30.0  # per HTTP request: a hung call holds one of the daemon's launch workers


class VastApi:
    def __init__(self, api_key: str, server_url: str | None, policy: RetryPolicy,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import vastai  # noqa: F401 - configures its logger before the api modules are used
        from vastai.api.client import VastClient

        logging.getLogger("vastai").setLevel(logging.WARNING)
        self._client = VastClient(api_key, server_url, retry=1, timeout=TIMEOUT_S)
        self.policy, self._sleep = policy, sleep

    @property
    def server_url(self) -> str:
        return str(self._client.server_url)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retries(fn, what, translate, self.policy, log=log, sleep=self._sleep)

    def search(self, query: dict[str, Any], *, bid: bool, storage_gib: float) -> list[dict[str, Any]]:
        """Offers (asks) matching ``query`` (Vast's filter dict), cheapest first."""
        from vastai.api import offers

        return self._call("search offers", lambda: offers.search_offers(
            self._client, dict(query), offer_type="bid" if bid else "on-demand", order=[["dph_total", "asc"]],
            limit=256, storage=storage_gib, no_default=True))

    def create(self, ask_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """Accept ask ``ask_id``: ``{"success": true, "new_contract": <instance id>}``. Not retried on
        a transient error: a retry after a lost answer could rent a second host (the caller looks
        for the label first on the next launch instead)."""
        from vastai.api import instances

        policy = RetryPolicy(max_attempts=1, max_total_s=self.policy.max_total_s)
        return call_with_retries(lambda: instances.create_instance_from_payload(self._client, ask_id, dict(body)),
                                 f"create instance on ask {ask_id}", translate, policy, log=log, sleep=self._sleep)

    def instances(self) -> list[dict[str, Any]]:
        """Every instance of the account (all pages)."""
        from vastai.api import instances

        return self._call("show instances", lambda: instances.show_instances(self._client))

    def instance(self, instance_id: int) -> dict[str, Any] | None:
        """One instance, or None once Vast no longer knows it."""
        from vastai.api import instances

        return self._call(f"show instance {instance_id}", lambda: instances.show_instance(self._client, instance_id))

    def destroy(self, instance_id: int) -> None:
        from vastai.api import instances

        self._call(f"destroy instance {instance_id}", lambda: instances.destroy_instance(self._client, instance_id))

    def volume_offers(self, machine_id: int, size_gib: float) -> list[dict[str, Any]]:
        """Volume offers (``POST /volumes/search/``) on one machine, best score first."""
        from vastai.api import offers

        return self._call("search volumes", lambda: offers.search_volumes(
            self._client, {"machine_id": {"eq": machine_id}}, limit=16, storage=size_gib, no_default=True))

    def create_volume(self, offer_id: int, size_gib: int, name: str) -> dict[str, Any]:
        """``PUT /volumes/`` on a volume offer. Not retried on a transient error (a lost answer may
        have made it): the caller looks for the name on its next call."""
        from vastai.api import storage

        policy = RetryPolicy(max_attempts=1, max_total_s=self.policy.max_total_s)
        return call_with_retries(lambda: storage.create_volume(self._client, offer_id, size_gib, name),
                                 f"create volume {name}", translate, policy, log=log, sleep=self._sleep)

    def volumes(self) -> list[dict[str, Any]]:
        """The account's volumes (``GET /volumes?owner=me``)."""
        from vastai.api import storage

        return self._call("show volumes", lambda: storage.show_volumes(self._client, "local"))

    def delete_volume(self, volume_id: int) -> None:
        from vastai.api import storage

        self._call(f"delete volume {volume_id}", lambda: storage.delete_volume(self._client, volume_id))

    def user(self) -> dict[str, Any]:
        """The account (``GET /users/current``; the client drops the key from the answer)."""
        from vastai.api import billing

        return self._call("show user", lambda: billing.show_user(self._client))

"""``LambdaProvider``: Lambda Cloud's on-demand GPU instances, through its REST API (api.py).

Idempotency without tags (DESIGN.md 4, "look before creating"): the instance's ``name`` is the
launch's client token, so ``launch`` first lists the account's instances for that name and
returns the one it finds. A launch whose answer was lost (a crash after the POST, a timeout)
is remembered for ``launch_grace_s`` (``intents.py``, under ``$GPUORCH_HOME``): a repeat within
that time waits for the instance to show up ("not yet") rather than launching a second one.

Lambda sells on-demand only: a spot request is refused (PermanentError ``InvalidOffer.Spot``),
and ``offers()`` has no spot prices, so the daemon never asks. No preemption notices. Job
volumes are persistent filesystems, given at launch (``filesystems.py``; docs/lambda.md, "Volumes").
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider import Finding, Instance, InstanceState, LaunchRequest, Offer, Provider, RetryPolicy, Runner
from gpuorch.provider.capabilities import Capabilities

from .api import LambdaApi
from .catalog import PROVIDER
from .config import LambdaOptions, api_key, parse_options
from .filesystems import FileSystems, boot_links
from .intents import LaunchIntents
from .offers import catalog_offers
from .parse import is_managed, offers_from_types, to_instance

log = logging.getLogger("gpuorch.lambda")


class LambdaProvider(FileSystems, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; ``SupportsDoctor``; ``SupportsPriceRefresh``;
    ``SupportsLaunchVolumes`` (``filesystems.py``)."""

    name = PROVIDER
    # The agent runs the job's image with the host's Docker (Lambda Stack ships it).
    capabilities = Capabilities(
        runs_containers=True, volumes_at_launch=True, disk_types=True,
        price_source="Lambda Cloud API GET /instance-types (price_cents_per_hour, regions_with_capacity_available)")

    def __init__(self, options: LambdaOptions, *, api_key: str, home: Path | None = None,
                 runner_options: Any = None, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        """``home``: where SSH keys and launch intents live (``$GPUORCH_HOME``; without it, no
        runner and intents in memory only). ``runner_options``: per-instance SSH runner overrides
        (tests; gpuorch.runners.pool.Runners)."""
        self.options, self.home = options, home
        policy = RetryPolicy(max_attempts=options.max_attempts, max_total_s=options.retry_max_s, max_wait_s=10.0)
        self._api = LambdaApi(api_key, endpoint=options.endpoint, timeout_s=options.timeout_s, policy=policy,
                              sleep=sleep)
        self._monotonic = monotonic
        self._intents = LaunchIntents(home, options.launch_grace_s, wall)
        self._offers: tuple[float, list[Offer]] | None = None
        self._runner_options = runner_options
        self._runners: Any = None

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> LambdaProvider:
        opts = parse_options(options)
        return cls(opts, api_key=api_key(opts), home=home)

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        return catalog_offers(parse_options(options), home)

    # -- offers ---------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """Live offers (regions with capacity now), kept ``offers_ttl_s``; a failed refresh keeps
        serving the last listing, and raises only when there is none."""
        now = self._monotonic()
        if self._offers is not None and now - self._offers[0] < self.options.offers_ttl_s:
            return list(self._offers[1])
        try:
            fresh = self.refresh_offers()
        except TransientError as e:
            if self._offers is None:
                raise
            log.warning("lambda: offers not refreshed (%s); keeping the last listing", e)
            return list(self._offers[1])
        self._offers = (now, fresh)
        return list(fresh)

    def refresh_offers(self) -> list[Offer]:
        """``SupportsPriceRefresh``: today's prices and capacity from ``GET /instance-types``."""
        return offers_from_types(self._api.instance_types(), self.options.regions or None)

    # -- launch ---------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        self.check_offer(request.offer)
        if request.spot:
            raise PermanentError("lambda sells no spot or interruptible instances; launch on-demand",
                                 code="InvalidOffer.Spot")
        if not self.options.allows(request.offer.region):
            raise PermanentError(f"lambda: region {request.offer.region} is not in providers.lambda.regions",
                                 code="InvalidOffer.Region")
        token = request.client_token
        found = self._find(token)
        if found is not None:
            self._intents.forget(token)
            return found
        if self._intents.in_flight(token):
            raise TransientError(f"lambda: the launch of {token} was sent and its instance is not listed yet; "
                                 "looking again before launching another", code="LaunchInFlight", retry_after=10.0)
        body = self._launch_body(request)
        self._intents.record(token)
        try:
            ids = self._api.launch(body)
        except Exception as e:
            # A refusal (capacity, quota, bad request, 429) launched nothing; a 5xx or a lost
            # connection may have, so its intent stays and the next call looks first.
            if not isinstance(e, TransientError) or e.code == "429":
                self._intents.forget(token)
            raise
        log.info("lambda: launched %s as %s", ids, token)
        if ids:
            try:
                return self.get(ids[0])
            except NotFoundError:
                pass
        return Instance(id=ids[0] if ids else f"pending:{token}", provider=PROVIDER, region=request.offer.region,
                        zone=request.offer.region, instance_type=request.offer.instance_type, spot=False,
                        state=InstanceState.PENDING, tags=dict(request.tags))

    def _find(self, token: str) -> Instance | None:
        mine = [d for d in self._api.instances() if d.get("name") == token]
        if len(mine) > 1:  # only a launch made around gpuorch could do this; the first one answers
            log.error("lambda: %d instances are named %s: %s", len(mine), token, [d.get("id") for d in mine])
        return to_instance(mine[0]) if mine else None

    def _launch_body(self, request: LaunchRequest) -> dict[str, Any]:
        from gpuorch.provider import launch_cloud_config, user_data

        body: dict[str, Any] = {
            "region_name": request.offer.region, "instance_type_name": request.offer.instance_type,
            "ssh_key_names": [self._ssh_key_name(request)], "quantity": 1, "name": request.client_token,
        }
        config = launch_cloud_config(self.home, request)
        mounts = self.launch_file_systems(request)
        if mounts:  # mounted over NFS at /lambda/nfs/<name>; the job's path links there from boot
            body["file_system_names"] = [name for name, _ in mounts]
            config = {**config, "bootcmd": [*config.get("bootcmd", ()), *boot_links(mounts)]}
        doc = user_data(config, request.max_lifetime_s)
        if doc:
            body["user_data"] = doc
        return body

    def _ssh_key_name(self, request: LaunchRequest) -> str:
        """The registered SSH key the launch names (Lambda requires exactly one): the job's login
        key, registered once under a name derived from its owner, job and public key. The
        host key and the login key also reach the instance through cloud-init (user_data)."""
        if self.home is not None:
            from gpuorch.runners.keys import ensure_job_key

            _, public = ensure_job_key(self.home, request.job_id)
        elif request.ssh_public_key:
            public = request.ssh_public_key.strip()
        else:
            raise PermanentError("lambda: a launch needs an SSH key; build the provider with a home (from_config) or "
                                 "pass ssh_public_key", code="NoSshKey")
        digest = hashlib.sha256(public.split()[1].encode() if len(public.split()) > 1 else public.encode()).hexdigest()
        owner = f"{request.owner}-" if request.owner else ""
        name = f"gpuorch-{owner}job{request.job_id}-{digest[:8]}"
        if not any(k.get("name") == name for k in self._api.ssh_keys()):
            self._api.add_ssh_key(name, " ".join(public.split()[:2]))
        return name

    # -- observe and end ------------------------------------------------------------------------
    def get(self, instance_id: str) -> Instance:
        if instance_id.startswith("pending:"):
            found = self._find(instance_id.removeprefix("pending:"))
            if found is None:
                raise NotFoundError(f"lambda: no instance named {instance_id.removeprefix('pending:')}")
            return found
        return to_instance(self._api.instance(instance_id))

    def list_managed(self) -> list[Instance]:
        return [to_instance(d) for d in self._api.instances() if is_managed(d)]

    def terminate(self, instance_id: str) -> None:
        if self._runners is not None:
            self._runners.forget(instance_id)
        try:
            inst = self.get(instance_id)
        except NotFoundError:
            return
        if not inst.state.alive:
            return
        try:
            self._api.terminate([inst.id])
        except NotFoundError:
            return
        log.info("lambda: terminating %s", inst.id)

    # -- runner, doctor -------------------------------------------------------------------------
    def runner(self, instance: Instance) -> Runner:
        """An SSH runner to the instance's public IP as ``ssh_user``, its host key the one gpuorch
        generated and handed to cloud-init, pinned before the first connection."""
        if self._runners is None:
            from gpuorch.provider import NoticeSource, Runners

            self._runners = Runners(self.home, self.options.ssh_user, self._runner_options, provider=PROVIDER,
                                    notice=NoticeSource(kind="none"))
        runner: Runner = self._runners.get(instance)
        return runner

    def doctor(self) -> list[Finding]:
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        if self._runners is not None:
            self._runners.close()
        self._api.close()

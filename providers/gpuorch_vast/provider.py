"""``VastProvider``: GPUs rented on Vast.ai's marketplace, through the official ``vastai`` client.

Offers are classes of the live market (``market.py``), cached ``offers_ttl_s``; a launch takes
the best live ask of its class then, carrying the attempt's client token as the instance label
(``parse.py``), and looks for that label before renting anything. Instances are destroyed, never
stopped: a stopped Vast instance still bills its storage (catalog.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, ProviderError, UserInputError
from gpuorch.provider import (
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    RetryPolicy,
    Runner,
    RunnerOptions,
    Runners,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.registry_creds import credential_for
from gpuorch.runners.inimage import InImageRunner

from .api import VastApi
from .config import VastOptions, parse_options
from .credentials import MISSING, find_key
from .image_login import docker_login_args
from .market import offers_of, pick, query
from .parse import PROVIDER, tags_of, to_instance
from .sshsetup import onstart
from .volumes import MachineVolumes

log = logging.getLogger("gpuorch.vast")
_EPOCH = datetime.min.replace(tzinfo=UTC)
_TOMBSTONES = 10_000  # destroyed instances remembered (Vast forgets them at once)


class VastProvider(MachineVolumes, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; one node per job; ``SupportsLaunchVolumes``
    (volumes on one machine, ``volumes.py``)."""

    name = PROVIDER
    # The instance is started from the job's image; the agent runs the job in it.
    capabilities = Capabilities(runs_containers=True, volumes_at_launch=True, disk_types=True)

    def __init__(self, options: VastOptions, api_key: str, *, home: Path | None = None,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 runner_options: RunnerOptions | None = None, now: Callable[[], datetime] = utcnow) -> None:
        """``runner_options``: per-instance overrides of the SSH runner (tests stand local sshds in)."""
        self.options, self.home = options, home
        policy = RetryPolicy(max_attempts=options.max_attempts, max_total_s=options.retry_max_s)
        self.api = VastApi(api_key, options.server_url, policy, sleep)
        self._monotonic, self._now = monotonic, now
        self._runners = Runners(home, options.ssh_user, runner_options, provider=PROVIDER)
        self._offers: tuple[float, list[Offer]] | None = None
        self._ended: dict[str, Instance] = {}  # destroyed by us: id -> its last look, ended
        self._region: dict[str, str] = {}  # instance id -> the region of the offer it was launched for

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> VastProvider:
        """Build from ``providers.vast``; the key from ``VAST_API_KEY`` or vastai's key file."""
        opts = parse_options(options)
        try:
            import vastai.api.client  # noqa: F401
        except ImportError:
            raise UserInputError("providers.vast: the vastai client is not installed; "
                                 "pip install -e '.[vast]'") from None
        found = find_key()
        if found is None:
            raise UserInputError(f"providers.vast: {MISSING}")
        return cls(opts, found[0], home=Path(home))

    # -- offers ------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """The live market's classes (``market.py``), cached ``offers_ttl_s``."""
        now = self._monotonic()
        if self._offers is not None and now < self._offers[0]:
            return list(self._offers[1])
        asks = self.api.search(query(self.options), bid=False, storage_gib=50)
        out = offers_of(asks, self.options)
        self._offers = (now + self.options.offers_ttl_s, out)
        return list(out)

    # -- instances ---------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``: the instance labelled with the token if there is one, else the
        best live ask of the offer's class, rented now; NoCapacityError when none is left."""
        o = request.offer
        self.check_offer(o)
        if request.nodes > 1:
            raise PermanentError("vast rents one machine per job (no multi-node placement)", code="InvalidRequest")
        if request.spot and o.spot_price_per_hour is None:
            raise PermanentError(f"vast {o.instance_type} in {o.region} has no interruptible offer",
                                 code="InvalidRequest")
        token = request.client_token
        found = self._find(token)
        if found is not None:
            return found
        image = request.image or self.options.image
        # A private image: the host's docker logs in with the registry's credentials (gpuorch.provider.registry_creds).
        cred = credential_for(image, PROVIDER, self.options.registries, self.options.docker_config)
        login = docker_login_args(cred, PROVIDER) if cred is not None else None
        q = query(self.options, gpu=o.gpu, count=o.gpu_count, region=o.region)
        volume = request.volumes[0] if request.volumes else None
        if volume is not None:  # the volume's machine, or nothing
            q["machine_id"] = {"eq": self.machine_of(volume.volume_id)}
        asks = self.api.search(q, bid=request.spot, storage_gib=request.disk_gib)
        chosen = pick(asks, o, request.spot, self.options)
        if chosen is None:
            raise NoCapacityError(f"vast: no live ask of {o.instance_type} in {o.region} within "
                                  f"{self.options.price_tolerance:.0%} of ${o.price(request.spot):.4f}/h",
                                  code="no_such_ask")
        ask, pay = chosen
        body: dict[str, Any] = {
            "client_id": "me", "image": image, "env": {}, "disk": request.disk_gib,
            "label": token, "runtype": "ssh", "onstart": onstart(self.home, request),
            "price": pay if request.spot else None,
        }
        if login is not None:
            body["image_login"] = login
        if volume is not None:
            body["volume_info"] = {"volume_id": int(volume.volume_id), "mount_path": volume.mount_path,
                                   "create_new": False}
        answer = self.api.create(int(ask["id"]), body)
        if not answer.get("success", True) or not isinstance(answer.get("new_contract"), int):
            raise NoCapacityError(f"vast: ask {ask['id']} was not rented ({answer.get('msg') or answer})",
                                  code=str(answer.get("error") or "no_such_ask"))
        iid = str(answer["new_contract"])
        self._region[iid] = o.region
        log.info("vast: rented %s (ask %s, %s %s, $%.4f/h %s) for job %s attempt %s", iid, ask["id"], o.instance_type,
                 ask.get("geolocation"), pay, "bid" if request.spot else "on-demand", request.job_id, request.attempt)
        row = self.api.instance(int(iid))
        inst = to_instance(row, o.region) if row is not None else None
        if inst is not None:
            return inst
        return Instance(id=iid, provider=PROVIDER, region=o.region, zone=o.zone, instance_type=o.instance_type,
                        spot=request.spot, state=InstanceState.PENDING, tags=request.tags, created_at=self._now())

    def _find(self, token: str) -> Instance | None:
        """The instance labelled ``token``: a live one first, else one this process destroyed."""
        mine = [i for row in self.api.instances() if str(row.get("label") or "").strip() == token
                and (i := self._instance(row)) is not None]
        if mine:
            return max(mine, key=lambda i: (i.state.alive, i.created_at or _EPOCH))
        tags = tags_of(token)
        return next((i for i in reversed(self._ended.values()) if tags and i.tags == tags), None)

    def _instance(self, row: dict[str, Any]) -> Instance | None:
        inst = to_instance(row, self._region.get(str(row.get("id"))))
        if inst is not None and inst.state == InstanceState.PREEMPTED:
            return self._settle(inst)
        return inst

    def _settle(self, inst: Instance) -> Instance:
        """An outbid (or host-stopped) instance is destroyed as soon as it is seen: paused, it would
        bill its storage until destroyed, and the job resumes from its checkpoint elsewhere. Its
        end time is unknown (Vast dates no outbid): None, so the daemon's observation stands."""
        try:
            self.api.destroy(int(inst.id))
        except NotFoundError:
            pass
        except ProviderError as e:  # destroyed on a later look
            log.warning("vast: could not destroy preempted instance %s yet: %s", inst.id, e)
            return inst
        log.info("vast: destroyed %s (%s)", inst.id, inst.state_reason)
        ended = inst.model_copy(update={"host": None, "port": None})
        self._remember(ended)
        return ended

    def _remember(self, ended: Instance) -> None:
        self._ended[ended.id] = ended
        while len(self._ended) > _TOMBSTONES:
            self._ended.pop(next(iter(self._ended)))

    def get(self, instance_id: str) -> Instance:
        """See ``Provider.get``. An outbid or host-stopped instance reads PREEMPTED (parse.py)."""
        if instance_id in self._ended:
            return self._ended[instance_id]
        if not instance_id.isdigit() or len(instance_id) > 18:
            raise NotFoundError(f"vast: no instance {instance_id!r}", code="NotFound")
        row = self.api.instance(int(instance_id))
        inst = self._instance(row) if row is not None else None
        if inst is None:
            raise NotFoundError(f"vast: no gpuorch instance {instance_id}", code="NotFound")
        return inst

    def list_managed(self) -> list[Instance]:
        """See ``Provider.list_managed``: every labelled instance of the account, any owner, and the
        ones this process destroyed while it remembers them."""
        listed = [i for row in self.api.instances() if (i := self._instance(row)) is not None]
        seen = {i.id for i in listed}
        return listed + [i for iid, i in self._ended.items() if iid not in seen]

    def terminate(self, instance_id: str) -> None:
        """See ``Provider.terminate``: destroy (a stopped instance would still bill its storage);
        quiet when Vast no longer knows it."""
        self._runners.forget(instance_id)
        if instance_id in self._ended or not instance_id.isdigit() or len(instance_id) > 18:
            return
        try:
            row = self.api.instance(int(instance_id))
            if row is None:
                return
            last = self._instance(row)  # a preempted one is destroyed (and remembered) by this look
            if instance_id in self._ended:
                return
            self.api.destroy(int(instance_id))
        except NotFoundError:
            return
        if last is not None:
            ended = last.model_copy(update={"state": InstanceState.TERMINATED, "ended_at": self._now(), "host": None,
                                            "port": None, "state_reason": last.state_reason or "destroyed by gpuorch"})
            self._remember(ended)

    def runner(self, instance: Instance) -> Runner:
        """An SSH runner to Vast's SSH host and port as ``ssh_user``, the attempt's host key pinned
        (installed by the onstart script, ``sshsetup.py``). RunnerUnavailable while it has no address.
        The instance is the job's container (its ``image:`` or the provider's): the agent runs the
        job in it directly, never through a container runtime (``InImageRunner``)."""
        return InImageRunner(self._runners.get(instance))

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: where the key comes from (never the key), and the account it opens."""
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        self._runners.close()

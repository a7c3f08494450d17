"""``RunpodProvider``: RunPod GPU pods, on-demand and interruptible, through RunPod's GraphQL API.

Every call goes through ``api.RunpodApi`` (retries, error translation); documents come from
``documents``, launch inputs and pod parsing from ``pods``, offers from ``offers``. A pod is
found again by its name (the attempt's client token) and its gpuorch tags ride in its env.
RunPod forgets a terminated pod at once, so the adapter keeps a tombstone of each pod it
terminates (``tombstones``): a repeated launch of a finished attempt gets the ended pod back,
never a second one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuorch.errors import AuthError, NotFoundError, PermanentError, ProviderError, UserInputError
from gpuorch.provider import (
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    NoticeSource,
    Offer,
    Provider,
    Runner,
    RunnerOptions,
    Runners,
    launch_cloud_config,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.registry_creds import credential_for
from gpuorch.runners.inimage import InImageRunner

from . import documents as doc
from .api import RunpodApi
from .catalog import PROVIDER
from .config import RunpodOptions, api_key, parse_options
from .offers import offers_from
from .pods import is_managed, launch_input, to_instance
from .registry import RegistryAuths
from .tombstones import Tombstones
from .volumes import NetworkVolumes

log = logging.getLogger("gpuorch.runpod")
SHUTDOWN = "kill -TERM 1"


class RunpodProvider(NetworkVolumes, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; ``SupportsDoctor``; ``SupportsLaunchVolumes``
    (network volumes, ``volumes.py``)."""

    name = PROVIDER
    # A pod is itself a container of the image RunPod starts: a job's ``image:`` is the pod's image
    # (``LaunchRequest.image``), and the agent runs the job's commands in it directly (InImageRunner).
    capabilities = Capabilities(runs_containers=True, volumes_at_launch=True, disk_types=True)

    def __init__(self, options: RunpodOptions, key: str, *, home: Path | None = None,
                 runner_options: RunnerOptions | None = None, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``key``: the API key (``config.api_key``), kept in memory only. ``home``: where SSH keys
        and tombstones live (``$GPUORCH_HOME``). ``runner_options``: per-instance SSH runner
        overrides (tests that stand a local sshd in for each pod; the daemon passes none)."""
        self.options, self.home = options, home
        self._api = RunpodApi(key, options.base_url(), max_attempts=options.max_attempts,
                              retry_max_s=options.retry_max_s, sleep=sleep, monotonic=monotonic)
        self._monotonic = monotonic
        self._tombs = Tombstones(home / "runpod" / "tombstones.json" if home is not None else None)
        # RunPod announces no reclaim ahead (an interruptible pod is stopped with a SIGTERM): no notice source.
        # The dead-man switch's shutdown: in a pod, ending PID 1 (sshd, from the start command) ends
        # the container, and RunPod stops billing its GPUs.
        def per_pod(inst: Instance) -> dict[str, Any]:
            return {"shutdown_command": SHUTDOWN, **(runner_options(inst) if runner_options else {})}

        self._runners = Runners(home, options.ssh_user, per_pod, provider=PROVIDER, notice=NoticeSource(kind="none"))
        self._offers: tuple[float, list[Offer]] | None = None
        self._registry_auths = RegistryAuths(self._api.query)

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> RunpodProvider:
        """Build from ``providers.runpod``; the key from ``RUNPOD_API_KEY`` or ``~/.runpod/config.toml``,
        checked against the API now (a refused key fails at start, naming the fix)."""
        opts = parse_options(options)
        key, _ = api_key(opts.profile)
        provider = cls(opts, key, home=Path(home))
        try:
            provider._api.query(doc.MYSELF, what="check the API key")
        except AuthError as e:
            raise UserInputError(f"providers.runpod: {e}") from None
        return provider

    # -- offers ------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """GPU types with today's prices in the configured clouds, cached ``offers_ttl_s``."""
        now = self._monotonic()
        if self._offers is not None and now < self._offers[0]:
            return list(self._offers[1])
        out = self.refresh_offers()
        self._offers = (now + self.options.offers_ttl_s, out)
        return list(out)

    def refresh_offers(self) -> list[Offer]:
        """``SupportsPriceRefresh``: every GPU type RunPod sells now, priced (``offers.py``)."""
        data = self._api.query(doc.GPU_TYPES, what="list GPU types")
        types = data.get("gpuTypes")
        if not isinstance(types, list):
            raise PermanentError("runpod list GPU types: the answer has no gpuTypes list", code="Unparseable")
        return offers_from(types, self.options.clouds)

    # -- pods --------------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``: looks for a pod named by the client token first (and for its
        tombstone), then deploys one, interruptible with the offer's spot price as the bid."""
        self.check_offer(request.offer)
        if request.offer.region not in self.options.clouds:
            raise PermanentError(f"runpod cloud {request.offer.region} is not in providers.runpod.clouds "
                                 f"{self.options.clouds}", code="RegionNotConfigured")
        if request.nodes > 1:
            raise PermanentError("runpod launches one pod per job (nodes: 1)", code="InvalidRequest")
        token = request.client_token
        found = self._by_name(token)
        if found is not None:
            return found
        tomb = self._tombs.get(token)
        if tomb is not None:
            return tomb
        image = request.image or self.options.image
        # A private image's login (registry.py): its credentials saved in the account, named by the deploy.
        cred = credential_for(image, PROVIDER, self.options.registries, self.options.docker_config)
        auth_id = self._registry_auths.auth_id(request.owner, cred) if cred is not None else None
        config = launch_cloud_config(self.home, request)
        keys = config.get("ssh_keys") or {}
        logins = config.get("ssh_authorized_keys") or []
        data_center, volume_id = self.options.data_center, None
        if request.volumes:  # the pod goes where its network volume lives
            vol = self.volume_of(request.volumes[0].volume_id)
            data_center, volume_id = str(vol.get("dataCenterId") or "") or None, str(vol["id"])
        try:
            body = launch_input(request, image=image, ssh_user=self.options.ssh_user,
                                host_key=(keys.get("ed25519_private", ""), keys.get("ed25519_public", "")),
                                login_key="\n".join(logins), data_center=data_center, network_volume_id=volume_id,
                                registry_auth_id=auth_id)
        except ValueError as e:
            raise PermanentError(f"launch of job {request.job_id} attempt {request.attempt}: {e}",
                                 code="InvalidRequest") from None
        document, field = ((doc.DEPLOY_INTERRUPTIBLE, "podRentInterruptable") if request.spot
                           else (doc.DEPLOY_ON_DEMAND, "podFindAndDeployOnDemand"))
        data = self._api.query(document, {"input": body}, what=f"deploy {token}")
        pod = data.get(field)
        if not isinstance(pod, dict) or not pod.get("id"):
            raise PermanentError(f"runpod deploy {token}: the answer names no pod", code="Unparseable")
        log.info("runpod: deployed pod %s (%s %s, %s) for job %s attempt %s", pod["id"], request.offer.region,
                 request.offer.instance_type, "interruptible" if request.spot else "on-demand", request.job_id,
                 request.attempt)
        return to_instance(pod)

    def _pods(self) -> list[dict[str, Any]]:
        data = self._api.query(doc.PODS, what="list pods")
        pods = (data.get("myself") or {}).get("pods")
        if not isinstance(pods, list):
            raise PermanentError("runpod list pods: the answer has no pods list", code="Unparseable")
        return [p for p in pods if isinstance(p, dict) and p.get("id")]

    def _by_name(self, token: str) -> Instance | None:
        found = [to_instance(p) for p in self._pods() if p.get("name") == token and is_managed(p)]
        return max(found, key=lambda i: i.state.alive) if found else None

    def get(self, instance_id: str) -> Instance:
        """See ``Provider.get``. A pod RunPod no longer knows: its tombstone, else NotFoundError."""
        try:
            data = self._api.query(doc.POD, {"input": {"podId": instance_id}}, what=f"get pod {instance_id}")
            pod = data.get("pod")
        except NotFoundError:
            pod = None
        if isinstance(pod, dict) and pod.get("id"):
            return self._reap(to_instance(pod))
        tomb = self._tombs.by_id(instance_id)
        if tomb is not None:
            return tomb
        raise NotFoundError(f"runpod: pod {instance_id} not found", code="NotFound")

    def list_managed(self) -> list[Instance]:
        """See ``Provider.list_managed``: the account's pods whose env marks them gpuorch's, any owner."""
        return [self._reap(to_instance(p)) for p in self._pods() if is_managed(p)]

    def _reap(self, inst: Instance) -> Instance:
        """A reclaimed interruptible pod stays in the account, stopped; gpuorch never resumes one
        (its job relaunches on a new pod), so it is terminated at once, its tombstone keeping the
        reclaim and its time. Quiet on failure: the next look tries again."""
        if inst.state is InstanceState.PREEMPTED and inst.tags:
            self._tombs.put(_token_of(inst), inst)
            try:
                self._api.query(doc.TERMINATE, {"input": {"podId": inst.id}}, what=f"terminate reclaimed pod {inst.id}")
            except ProviderError as e:
                log.warning("runpod: reclaimed pod %s not terminated yet: %s", inst.id, e)
        return inst

    def terminate(self, instance_id: str) -> None:
        """See ``Provider.terminate``: the tombstone first (intent before the side effect), then
        ``podTerminate``; quiet for a pod already gone."""
        self._runners.forget(instance_id)
        try:
            inst = self.get(instance_id)
        except NotFoundError:
            return
        if inst.tags:
            self._tombs.put(_token_of(inst), inst)
        try:
            self._api.query(doc.TERMINATE, {"input": {"podId": instance_id}}, what=f"terminate pod {instance_id}")
        except NotFoundError:
            return

    def runner(self, instance: Instance) -> Runner:
        """An SSH runner to the pod's public IP and mapped port, its host key pinned (the attempt's
        key, installed by the pod's start command). RunnerUnavailable while it has no address.
        The pod is the job's container (its ``image:`` or the provider's): the agent runs the job
        in it directly, never through a container runtime (``InImageRunner``)."""
        return InImageRunner(self._runners.get(instance))

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: where the key comes from, and one read of each kind the adapter makes."""
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        self._runners.close()
        self._api.close()


def _token_of(inst: Instance) -> str:
    from gpuorch.provider import client_token

    return client_token(inst.job_id or 0, inst.attempt or 0, inst.owner)


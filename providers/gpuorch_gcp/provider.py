"""``GcpProvider``: Compute Engine spot and on-demand GPU VMs, through google-cloud-compute.

The SDK is imported only when the provider is built (``calls.Gce``), so the core never loads it
(1-1.7 s) for a daemon without GCP. Every API call goes through ``calls.Gce`` (retries, error
translation); request bodies come from ``requests``, responses are read by ``parse``.

Instance ids are ``<zone>/<name>``: GCE names are unique per zone, and the name is derived from
the launch's client token (``names.instance_name``), so a launch repeated after a crash addresses
the same VM. The insert also carries a ``requestId`` derived from the token, which GCE honours
for 60 minutes: a repeat within that time gets the first operation back even if the VM has
been deleted since.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuorch.errors import AuthError, NotFoundError, PermanentError, ProviderError, TransientError, UserInputError
from gpuorch.provider import (
    TAG_MANAGED,
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Runner,
    RunnerUnavailable,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import TAG_NODE

from .calls import Gce, RetryPolicy
from .config import DEFAULT_SCOPES, GcpOptions, parse_options
from .errors import operation_error
from .gang import MAX_NODES, GcpGangs
from .names import instance_name, label_filter, label_key, request_id
from .offers import catalog_offers
from .parse import HOSTKEYS, PREEMPTED_OP, PROVIDER, gone_preempted, host_keys, is_spot, preempted_ops, to_instance
from .registry import GarLogin
from .requests import instance_body, with_placement_policy
from .volumes import PersistentDisks

log = logging.getLogger("gpuorch.gcp")
_PREEMPTED_FILTER = f'operationType = "{PREEMPTED_OP}"'


class GcpProvider(GcpGangs, PersistentDisks, GarLogin, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; volumes: ``SupportsVolumes`` (volumes.py);
    gangs (``nodes:``) under a compact placement policy (gang.py, ``gpuorch.provider.gang_cloud``)."""

    name = PROVIDER
    # The agent runs docker on the VM (docs/workloads.md) and logs it in to Artifact Registry (registry.py).
    capabilities = Capabilities(
        max_nodes=MAX_NODES, runs_containers=True, volume_attach_check=True, disk_types=True, registry_login=True,
        price_source="Compute Engine machineTypes + Cloud Billing Catalog API (services/6F81-5844-456A/skus)")

    def __init__(self, options: GcpOptions, *, home: Path | None = None, credentials: Any = None,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utcnow, offers: list[Offer] | None = None,
                 runner_options: Any = None) -> None:
        """``home``: where SSH keys live (``$GPUORCH_HOME``; without it, no runner).
        ``credentials``: google-auth credentials (default: the standard chain; anonymous
        against a test ``endpoint``). ``offers``: replaces the catalog's (tests).
        ``runner_options``: per-instance SSH runner overrides (tests; see gpuorch.runners.pool.Runners).
        ``now``: the wall clock preemption deadlines are compared with."""
        self.options = options
        policy = RetryPolicy(max_attempts=options.max_attempts, max_total_s=options.retry_max_s)
        self._gce = Gce(options.project, endpoint=options.endpoint, credentials=credentials, policy=policy,
                        sleep=sleep, monotonic=monotonic, billing_endpoint=options.billing_endpoint)
        self._monotonic, self._now = monotonic, now
        self.home = home
        self._given_offers = offers
        self._seen: dict[str, Instance] = {}  # id -> last seen (fills in for a VM GCE deleted)
        self._runner_options = runner_options
        self._runners: Any = None
        self._host_keys_asked: dict[str, datetime] = {}  # id -> first look, for a VM without created_at

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> GcpProvider:
        """Build from ``providers.gcp`` and check it against GCE now (``check``), so a bad project,
        a missing credential or a zone without offers fails at start, naming the option."""
        opts = parse_options(options)
        try:
            import google.cloud.compute_v1  # noqa: F401
        except ImportError:
            raise UserInputError("providers.gcp: google-cloud-compute is not installed; "
                                 "pip install 'gpuorch[gcp]'") from None
        try:
            provider = cls(opts, home=Path(home))
        except Exception as e:  # google.auth DefaultCredentialsError and the like, at client creation
            raise UserInputError(f"providers.gcp: cannot build the GCE client: {e}; see docs/gcp.md for credentials") \
                from None
        provider.check()
        return provider

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """What ``providers.gcp`` would sell, without the SDK or a call (``submit``'s fit check)."""
        return catalog_offers(parse_options(options), Path(home))

    def check(self) -> None:
        """Offers exist for the configuration, and the project answers a cheap listing."""
        if not self.offers():
            raise UserInputError(f"providers.gcp.zones: the catalog has no GCP offer in "
                                 f"{', '.join(self.options.zones + self.options.regions)}; pick zones it lists "
                                 "(`gpuorch offers --provider gcp`)")
        zone = self.offers()[0].zone
        try:
            self._gce.list_zone(zone, label_filter({label_key(TAG_MANAGED): "true"}))
        except AuthError as e:
            raise UserInputError(f"providers.gcp: {e}") from None
        except PermanentError as e:
            raise UserInputError(f"providers.gcp.project: {e}; check the project id") from None

    def client(self) -> Gce:
        """The GCE call wrapper (for tests and tools)."""
        return self._gce

    # -- offers ------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """See ``Provider.offers``: the catalog's GCP rows in the configured zones/regions. No API
        call; the catalog is read once per process and the reconciler reuses offers for its TTL."""
        from .offers import select_offers

        if self._given_offers is not None:
            return select_offers(self._given_offers, self.options)
        return catalog_offers(self.options, self.home)

    def refresh_offers(self) -> list[Offer]:
        """``SupportsPriceRefresh``: the configured zones' GPU machine types (google-cloud-compute)
        priced from the Cloud Billing Catalog (google-cloud-billing); see refresh.py."""
        from .refresh import live_offers

        return live_offers(self._gce, self.options)

    # -- instances ---------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``. Inserts the token-named VM with the token's ``requestId`` and
        waits (at most ``operation_timeout_s``) for the insert to finish, because capacity and
        quota refusals arrive in the operation. 409 (the name exists): that VM is returned.
        Node 0 of a gang (``request.nodes`` > 1) launches the whole gang (gang.py)."""
        if request.nodes > 1 and request.node == 0:
            return self._gang_launch(request)
        return self._launch_one(request)

    def _launch_one(self, request: LaunchRequest) -> Instance:
        o = request.offer
        self.check_offer(o)
        if not self.options.allows(o.zone):
            raise PermanentError(f"gcp zone {o.zone} is not in providers.gcp zones/regions", code="ZoneNotConfigured")
        name = instance_name(request.client_token)
        try:
            body = instance_body(
                request, zone=o.zone, image=self.options.image, disk_type=self.options.disk_type,
                network=self.options.network, subnetwork=self.options.subnetwork, external_ip=self.options.external_ip,
                service_account=self.options.service_account, scopes=DEFAULT_SCOPES,
                cloud_config=self._cloud_config(request))
            if request.placement_group:
                body = with_placement_policy(body, self._policy_url(request))
        except ValueError as e:
            raise PermanentError(f"launch of job {request.job_id} attempt {request.attempt}: {e}",
                                 code="InvalidRequest") from None
        what = f"gce insert {o.zone}/{name}"
        try:
            op = self._gce.insert(o.zone, body, request_id(request.client_token))
        except PermanentError as e:
            if e.code not in ("alreadyExists", "409"):
                raise
            log.info("gcp: %s/%s exists already (job %s attempt %s)", o.zone, name, request.job_id, request.attempt)
            return self._get_or_placeholder(request, name, InstanceState.PENDING)
        op = self._gce.wait(o.zone, op, self.options.operation_timeout_s)
        err = operation_error(op, what)
        if err is not None:
            if err.code in ("alreadyExists", "RESOURCE_ALREADY_EXISTS"):
                return self._get_or_placeholder(request, name, InstanceState.PENDING)
            raise err
        done = op.get("status") == "DONE"
        log.info("gcp: launched %s/%s (%s %s) for job %s attempt %s%s", o.zone, name, o.instance_type,
                 "spot" if request.spot else "on-demand", request.job_id, request.attempt,
                 "" if done else " (insert still running)")
        # Done and gone: a repeat of a launch whose VM was deleted since (requestId).
        return self._get_or_placeholder(request, name, InstanceState.TERMINATED if done else InstanceState.PENDING)

    def _get_or_placeholder(self, request: LaunchRequest, name: str, missing: InstanceState) -> Instance:
        o = request.offer
        try:
            return self._get_one(f"{o.zone}/{name}")
        except NotFoundError:
            return Instance(id=f"{o.zone}/{name}", provider=PROVIDER, region=o.region, zone=o.zone,
                            instance_type=o.instance_type, spot=request.spot, state=missing, tags=request.tags)

    def get(self, instance_id: str) -> Instance:
        """See ``Provider.get``. A spot VM GCE deleted after reclaiming it reads PREEMPTED while
        its ``compute.instances.preempted`` operation is still listed; NotFoundError otherwise.
        A gang's node: the gang, as its node 0 (gang.py)."""
        inst = self._get_one(instance_id)
        return self._gang_observe(inst) if TAG_NODE in inst.tags else inst

    def _get_one(self, instance_id: str) -> Instance:
        zone, name = self._split(instance_id)
        try:
            d = self._gce.get(zone, name)
        except NotFoundError:
            op = self._preempted_in(zone).get(instance_id)
            if op is None:
                raise NotFoundError(f"gcp: {instance_id} not found", code="notFound") from None
            return gone_preempted(instance_id, op, self._seen.get(instance_id))
        ops = self._preempted_in(zone) if self._maybe_reclaimed(d) else {}
        return self._remember(to_instance(d, ops.get(instance_id), self._now()))

    def list_managed(self) -> list[Instance]:
        """See ``Provider.list_managed``: one aggregated listing by the ``gpuorch-managed`` label
        (configured zones only), plus the reclaimed spot VMs GCE has deleted whose preempted
        operation is still listed (one more aggregated listing)."""
        listed = [d for d in self._gce.list_aggregated(label_filter({label_key(TAG_MANAGED): "true"}))
                  if self.options.allows(_zone(d))]
        ops = {k: op for k, op in preempted_ops(self._gce.operations(_PREEMPTED_FILTER)).items()
               if self.options.allows(k.split("/", 1)[0])}
        now = self._now()
        out = [self._remember(to_instance(d, ops.get(f"{_zone(d)}/{d['name']}"), now)) for d in listed]
        present = {i.id for i in out}
        for key, op in ops.items():
            if key in present:
                continue
            gone = gone_preempted(key, op, self._seen.get(key))
            if gone.tags.get(TAG_MANAGED) == "true":
                out.append(gone)
        return self._gang_present(out)  # a gang as its node 0; sweeps ended gangs' policies

    def terminate(self, instance_id: str) -> None:
        """See ``Provider.terminate``: deletes the VM and returns without waiting; quiet when GCE
        does not know it (404) or the id is not one of ours. A gang's node: every node, then its policy."""
        if self._runners is not None:
            self._runners.forget(instance_id)
        try:
            zone, name = self._split(instance_id)
            seen = self._seen.get(instance_id) or self._get_one(instance_id)
        except NotFoundError:
            return
        if TAG_NODE in seen.tags:
            self._gang_terminate(seen)
            return
        try:
            self._gce.delete(zone, name)
        except NotFoundError:
            return
        log.info("gcp: deleting %s", instance_id)

    def runner(self, instance: Instance) -> Runner:
        """An SSH runner to the VM's external IP as ``ssh_user`` (the runner every SSH-reached
        adapter uses, gpuorch.runners.pool), reading GCE's preemption notice. Before each new
        connection it pins the host keys the guest published in guest attributes, with the key
        gpuorch supplied (``_published_host_keys``); not ready until they are published. A gang:
        one runner per node, node 0's internal IP as ``MASTER_ADDR`` (``gang_cloud.GangRunner``)."""
        if TAG_NODE in instance.tags:
            return self._gang_runner(instance)
        return self._runner_pool().get(instance)

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: credentials through the SDK's standard chain and each permission the
        adapter needs, one cheap call apiece (``doctor.py``); never prints a secret."""
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        if self._runners is not None:
            self._runners.close()
        self._gce.close()

    # -- helpers -----------------------------------------------------------------------------
    def _runner_pool(self) -> Any:
        if self._runners is None:
            from gpuorch.agent.protocol import NoticeSource
            from gpuorch.provider import Runners

            self._runners = Runners(self.home, self.options.ssh_user, self._runner_options, provider="gcp",
                                    notice=NoticeSource(kind="gcp"), host_keys=self._published_host_keys)
        return self._runners

    def _published_host_keys(self, instance: Instance) -> list[str] | None:
        """The SSH host keys the VM's guest published in its guest attributes (``hostkeys/``),
        read through the Compute API (a trusted channel: not the network path to the VM), for
        the runner to pin with the key gpuorch supplied (gpuorch.runners.pool.Runners).

        None while nothing is published and the VM is younger than ``host_keys_wait_s`` (the
        runner is then not ready); [] after that (only the supplied key is trusted: an image
        without a guest agent, or guest attributes refused). A transient API failure is
        RunnerUnavailable: try again on a later pass.
        """
        zone, name = self._split(instance.id)
        try:
            keys = host_keys(self._gce.guest_attributes(zone, name, f"{HOSTKEYS}/"))
        except NotFoundError:
            keys = []
        except TransientError as e:
            raise RunnerUnavailable(f"{instance.id}: cannot read its published SSH host keys: {e}") from None
        except ProviderError as e:  # refused (permissions, guest attributes off): as if none published
            log.warning("gcp: %s: reading guest attributes failed: %s", instance.id, e)
            keys = []
        if keys:
            self._host_keys_asked.pop(instance.id, None)
            return keys
        since = instance.created_at or self._host_keys_asked.setdefault(instance.id, self._now())
        waited = (self._now() - since).total_seconds()
        if waited < self.options.host_keys_wait_s:
            return None
        log.warning("gcp: %s published no SSH host keys %.0fs after its creation; trusting only the key gpuorch "
                    "supplied through cloud-init", instance.id, waited)
        return []

    def _cloud_config(self, request: LaunchRequest) -> dict[str, Any]:
        from gpuorch.provider import launch_cloud_config

        config = launch_cloud_config(self.home, request)
        if self.home is not None:  # cloud-init publishes the host key it installs to guest attributes
            config["ssh_publish_hostkeys"] = {"enabled": True}  # cloud-init's default on GCE, said explicitly
        return config

    def _split(self, instance_id: str) -> tuple[str, str]:
        zone, _, name = instance_id.partition("/")
        if not name or not self.options.allows(zone):
            raise NotFoundError(f"gcp: {instance_id!r} is not an instance id of providers.gcp (<zone>/<name>)",
                                code="notFound")
        return zone, name

    def _maybe_reclaimed(self, d: dict[str, Any]) -> bool:
        """Worth a look for a preempted operation: a spot VM not plainly running."""
        return is_spot(d) and d.get("status") not in ("RUNNING", "PROVISIONING", "STAGING")

    def _preempted_in(self, zone: str) -> dict[str, Any]:
        return dict(preempted_ops(self._gce.operations(_PREEMPTED_FILTER, zone=zone)))

    def _remember(self, inst: Instance) -> Instance:
        self._seen[inst.id] = inst
        return inst


def _zone(d: dict[str, Any]) -> str:
    return str(d.get("zone") or "").rstrip("/").rsplit("/", 1)[-1]


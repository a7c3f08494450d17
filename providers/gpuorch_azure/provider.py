"""``AzureProvider``: Azure spot and on-demand GPU VMs, through azure-mgmt-compute.

The SDKs (azure-mgmt-compute, azure-identity) are imported only when the first call is made
(``calls.Arm``), so the core and the CLI never load them for a daemon without Azure. Every ARM
call goes through ``calls.Arm`` (retries, error translation); request bodies come from
``requests``, responses are read by ``parse``, offers come from the catalog (``offers``).

An instance's id is its VM name, derived from the launch's client token (``names.vm_name``)
and unique in the configured resource group: a repeated launch addresses the same VM, and the
create carries ``If-None-Match: *`` so two racing launches cannot both create it. The VM's NIC,
public IP and OS disk are created by the same PUT and deleted with the VM (``requests``).

What ARM cannot say is remembered in memory (``_seen``, ``_tombstones``): a spot VM that
Azure evicted with eviction policy Delete just disappears, so a VM seen alive that vanishes
without a terminate from this provider reads PREEMPTED (spot) for ``tombstone_s``; a VM this
provider deleted reads TERMINATED, and a launch with its token returns that, not a new VM.
A restarted daemon has forgotten both: the VM is then simply gone (NotFoundError).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuorch.errors import (
    AuthError,
    NoCapacityError,
    NotFoundError,
    PermanentError,
    ProviderError,
    QuotaError,
    UserInputError,
)
from gpuorch.provider import (
    TAG_MANAGED,
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Runner,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import TAG_NODE

from .calls import Arm, Exists
from .config import AzureOptions, parse_options
from .errors import classify, translate
from .gang import MAX_NODES, AzureGangs
from .names import is_vm_name, split_zone, vm_name
from .offers import PRICE_SOURCE, catalog_offers, require_offers, select_offers
from .parse import (
    EVICTED_DELETED,
    POWERED_OFF,
    PROVIDER,
    failure_code,
    nic_addresses,
    nic_ids,
    public_address,
    to_instance,
)
from .registry import AcrLogin
from .requests import login_key, vm_body, with_proximity_placement_group
from .volumes import ManagedDisks

log = logging.getLogger("gpuorch.azure")


class AzureProvider(AzureGangs, ManagedDisks, AcrLogin, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; volumes: ``SupportsVolumes`` (volumes.py);
    gangs (``nodes:``) in a proximity placement group (gang.py, ``gpuorch.provider.gang_cloud``)."""

    name = PROVIDER
    capabilities = Capabilities(max_nodes=MAX_NODES, runs_containers=True, volume_attach_check=True,
                                registry_login=True, disk_types=True, price_source=PRICE_SOURCE)

    def __init__(self, options: AzureOptions, *, home: Path | None = None, credential: Any = None,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = utcnow, offers: list[Offer] | None = None,
                 runner_options: Any = None) -> None:
        """``home``: where SSH keys live (``$GPUORCH_HOME``; without it, launches need
        ``request.ssh_public_key`` and there is no runner). ``credential``: an azure-core
        TokenCredential (default: ``DefaultAzureCredential``). ``offers``: replaces the catalog's
        (tests). ``runner_options``: per-instance SSH runner overrides (tests; see
        gpuorch.runners.pool.Runners). ``now``: the clock that dates evictions."""
        self.options = options
        self._arm = Arm(options, credential=credential, sleep=sleep)
        self._monotonic, self._now = monotonic, now
        self.home = home
        self._given_offers = offers
        self._seen: dict[str, Instance] = {}  # VM name -> as last seen
        self._terminated: set[str] = set()  # VM names this provider asked ARM to delete
        self._tombstones: dict[str, tuple[float, Instance]] = {}  # VM name -> (expiry, ended instance)
        self._hosts: dict[str, str] = {}  # VM name -> address (static for the VM's life)
        self._runner_options = runner_options
        self._runners: Any = None

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> AzureProvider:
        """Build from ``providers.azure`` and check it against ARM now (``check``), so a bad
        subscription, resource group or credential fails at start, naming the option."""
        opts = parse_options(options)
        try:
            import azure.identity
            import azure.mgmt.compute  # noqa: F401
        except ImportError:
            raise UserInputError("providers.azure: azure-mgmt-compute and azure-identity are not installed; "
                                 "pip install 'gpuorch[azure]'") from None
        provider = cls(opts, home=Path(home))
        provider.check()
        return provider

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """What ``providers.azure`` would sell, without the SDK or a call (``submit``'s fit check)."""
        return catalog_offers(parse_options(options), Path(home))

    def check(self) -> None:
        """Offers exist in the configured regions (once a catalog exists: before the first
        Retail Prices refresh there is none, and the adapter starts without offers, saying so),
        and the resource group answers a listing with the credential the chain finds;
        UserInputError naming the option otherwise."""
        require_offers(self.offers(), self.options, self.home, given=self._given_offers is not None)
        try:
            self._arm.list_vms()
        except AuthError as e:
            raise UserInputError(f"providers.azure: {e}") from None
        except ProviderError as e:
            field = {"ResourceGroupNotFound": "resource_group", "SubscriptionNotFound": "subscription_id",
                     "InvalidSubscriptionId": "subscription_id"}.get(e.code or "")
            if field is None:
                raise UserInputError(f"providers.azure: {e}") from None
            raise UserInputError(f"providers.azure.{field}: {e}; check the name (`az group list`)") from None

    def client(self) -> Arm:
        """The ARM call wrapper (for tests and tools)."""
        return self._arm

    # -- offers ------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """See ``Provider.offers``: the catalog's Azure rows in the configured regions. No API
        call; the catalog is read once per process and the reconciler reuses offers for its TTL."""
        if self._given_offers is not None:
            return select_offers(self._given_offers, self.options)
        return catalog_offers(self.options, self.home)

    def refresh_offers(self) -> list[Offer]:
        """``SupportsPriceRefresh``: the configured regions' GPU sizes and zones (resource_skus)
        priced from the public Retail Prices API; see refresh.py."""
        from .refresh import live_offers

        return live_offers(self._arm, self.options)

    # -- instances ---------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``. Looks for the token's VM first; creates it (only if missing)
        and follows the create for at most ``launch_wait_s``, because capacity and quota refusals
        (``AllocationFailed``) arrive while it runs. A VM such a refusal leaves behind is deleted
        before NoCapacityError/QuotaError is raised. Still running after the wait: PENDING.
        Node 0 of a gang (``request.nodes`` > 1) launches the whole gang (gang.py)."""
        return self._gang_launch(request) if request.nodes > 1 and request.node == 0 else self._launch_one(request)

    def _launch_one(self, request: LaunchRequest) -> Instance:
        o = request.offer
        self.check_offer(o)
        if o.region not in self.options.regions:
            raise PermanentError(f"azure region {o.region} is not in providers.azure.regions {self.options.regions}",
                                 code="RegionNotConfigured")
        try:
            split_zone(o.zone, o.region)
        except ValueError as e:
            raise PermanentError(str(e), code="ZoneNotSupported") from None
        name = vm_name(request.client_token)
        found = self._find(name, request)
        if found is not None:
            return found
        body = self._body(request, name)
        if request.placement_group:
            body = with_proximity_placement_group(body, self._ppg_id(request))
        try:
            poller = self._arm.begin_create(name, body)
        except Exists:  # a racing launch created it between our look and our create
            return self._find(name, request) or self._placeholder(request, name)
        log.info("azure: creating %s (%s %s %s) for job %s attempt %s", name, o.region, o.instance_type,
                 "spot" if request.spot else "on-demand", request.job_id, request.attempt)
        self._follow(poller, name, request)
        return self._find(name, request) or self._placeholder(request, name)

    def _find(self, name: str, request: LaunchRequest) -> Instance | None:
        """The token's VM as it is now; a VM a capacity or quota refusal left behind is deleted
        and the refusal raised again (a crash between the refusal and the cleanup)."""
        try:
            vm = self._arm.get_vm(name)
        except NotFoundError:
            tomb = self._tombstone(name)
            return tomb
        code = failure_code(vm)
        if code is not None and classify(code) in (NoCapacityError, QuotaError):
            self._cleanup(name)
            raise classify(code)(f"azure: create VM {name}: {code} (found failed; deleting it)", code=code)
        return self._observe(vm, request.tags)

    def _follow(self, poller: Any, name: str, request: LaunchRequest) -> None:
        what = f"azure: create VM {name} in {request.offer.region} ({request.offer.instance_type})"
        try:
            poller.wait(timeout=self.options.launch_wait_s)
        except Exception as e:
            err = translate(e, what)
            if err is None:
                raise
            log.warning("%s failed: %s; deleting what it left behind", what, err)
            self._cleanup(name)
            raise err from None
        if not poller.done():
            log.info("%s still running after %.0fs", what, self.options.launch_wait_s)

    def _cleanup(self, name: str) -> None:
        """Delete a VM a failed create left behind (it bills nothing, but holds the name)."""
        try:
            self._arm.begin_delete(name)
        except ProviderError as e:
            log.warning("azure: cannot delete %s left by a failed create: %s", name, e)

    def _body(self, request: LaunchRequest, name: str) -> dict[str, Any]:
        from gpuorch.provider import launch_cloud_config, user_data

        cloud_config = launch_cloud_config(self.home, request)
        key = login_key(cloud_config, request.ssh_public_key)
        if not key:
            raise PermanentError("azure: a Linux VM needs an SSH key: build the provider with a home "
                                 "(from_config does) or give the request an ssh_public_key", code="NoSshKey")
        try:
            return vm_body(
                request, name=name, subnet_id=self.options.subnet_id[request.offer.region], image=self.options.image,
                admin_user=self.options.admin_user, ssh_public_key=key,
                user_data=user_data(cloud_config, request.max_lifetime_s), public_ip=self.options.public_ip,
                network_security_group_id=self.options.network_security_group_id,
                os_disk_type=self.options.os_disk_type, eviction_policy=self.options.eviction_policy)
        except ValueError as e:
            raise PermanentError(f"launch of job {request.job_id} attempt {request.attempt}: {e}",
                                 code="InvalidRequest") from None

    def _placeholder(self, request: LaunchRequest, name: str) -> Instance:
        o = request.offer
        return Instance(id=name, provider=PROVIDER, region=o.region, zone=o.zone, instance_type=o.instance_type,
                        spot=request.spot, state=InstanceState.PENDING, tags=request.tags)

    def get(self, instance_id: str) -> Instance:
        """See ``Provider.get``. No ``preemption_deadline``: ARM does not announce evictions (the
        agent reads them inside the VM). A VM gone after an eviction reads PREEMPTED, one this
        provider deleted TERMINATED, for ``tombstone_s``; NotFoundError otherwise."""
        if not is_vm_name(instance_id):
            raise NotFoundError(f"azure: {instance_id!r} is not a VM name gpuorch uses", code="NotFound")
        try:
            vm = self._arm.get_vm(instance_id)
        except NotFoundError:
            tomb = self._tombstone(instance_id)
            if tomb is None:
                raise
            return self._gang_observe(tomb) if TAG_NODE in tomb.tags else tomb
        inst = self._observe(vm)
        return self._gang_observe(inst) if TAG_NODE in inst.tags else inst

    def list_managed(self) -> list[Instance]:
        """See ``Provider.list_managed``: the resource group's VMs tagged ``gpuorch:managed``
        (one paged listing with instance views, filtered here: ARM's VM listing has no tag
        filter), plus those that vanished while this provider watched them (see ``get``).
        A managed VM powered off from inside (still billed) is deleted on sight."""
        out: list[Instance] = []
        present: set[str] = set()
        for vm in self._arm.list_vms():
            if (vm.get("tags") or {}).get(TAG_MANAGED) != "true":
                continue
            inst = self._observe(vm)
            present.add(inst.id)
            if inst.state_reason == POWERED_OFF:
                log.warning("azure: %s is powered off but still allocated (billed); deleting it", inst.id)
                self.terminate(inst.id)
            out.append(inst)
        for name in list(self._seen) + list(self._tombstones):
            if name not in present:
                tomb = self._tombstone(name)
                if tomb is not None and tomb.tags.get(TAG_MANAGED) == "true" and tomb.id not in {i.id for i in out}:
                    out.append(tomb)
        return self._gang_present(out)  # a gang as its node 0; sweeps ended gangs' groups

    def terminate(self, instance_id: str) -> None:
        """See ``Provider.terminate``: asks ARM to delete the VM (its NIC, IP and OS disk go with
        it) and returns without waiting; quiet when ARM does not know it."""
        if self._runners is not None:
            self._runners.forget(instance_id)
        if not is_vm_name(instance_id):
            return
        seen = self._seen.get(instance_id) or self._find_quietly(instance_id)
        if seen is not None and TAG_NODE in seen.tags:
            return self._gang_terminate(seen)  # every node, then the group
        self._terminated.add(instance_id)
        self._hosts.pop(instance_id, None)
        self._arm.begin_delete(instance_id)
        log.info("azure: deleting %s", instance_id)

    def runner(self, instance: Instance) -> Runner:
        """An SSH runner (gpuorch.runners.pool) to the VM as ``admin_user``, its host key pinned, reading Azure's
        Scheduled Events for the notice. A gang: one runner per node, node 0's private IP as ``MASTER_ADDR``."""
        return self._gang_runner(instance) if TAG_NODE in instance.tags else self._runner_pool().get(instance)

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: credentials through the SDK's standard chain and each permission the
        adapter needs, one cheap call apiece (``doctor.py``); never prints a secret."""
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        if self._runners is not None:
            self._runners.close()
        self._arm.close()

    # -- helpers -----------------------------------------------------------------------------
    def _observe(self, vm: dict[str, Any], wanted_tags: dict[str, str] | None = None) -> Instance:
        name = str(vm["name"])
        inst = to_instance(vm, wanted_tags=wanted_tags)
        if inst.state == InstanceState.RUNNING:
            host = self._host(name, vm)
            if host:
                inst = inst.model_copy(update={"host": host, "port": 22})
        self._seen[name] = inst
        self._tombstones.pop(name, None)
        if not inst.state.alive:
            self._hosts.pop(name, None)
        return inst

    def _find_quietly(self, name: str) -> Instance | None:
        try:
            return self._observe(self._arm.get_vm(name))
        except NotFoundError:
            return None

    def _host(self, name: str, vm: dict[str, Any]) -> str | None:
        """The VM's address: its public IP (``public_ip``), else its private one. Two reads of
        Microsoft.Network on first sight, then remembered."""
        if name in self._hosts:
            return self._hosts[name]
        nics = nic_ids(vm)
        if not nics:
            return None
        try:
            private, ip_id = nic_addresses(self._arm.get_resource(nics[0]))
            host = private
            if self.options.public_ip:
                host = public_address(self._arm.get_resource(ip_id)) if ip_id else None
        except NotFoundError:
            return None
        if host:
            self._hosts[name] = host
        return host

    def _tombstone(self, name: str) -> Instance | None:
        """What a VM ARM no longer knows ended as, if this provider saw it (see the module doc)."""
        now = self._monotonic()
        kept = self._tombstones.get(name)
        if kept is not None:
            if now < kept[0]:
                return kept[1]
            del self._tombstones[name]
            return None
        last = self._seen.pop(name, None)
        if last is None:
            return None
        reason: str | None
        if name in self._terminated:
            state, reason = InstanceState.TERMINATED, "terminated-by-request"
        elif last.state == InstanceState.PREEMPTED:  # deallocated by an eviction, then deleted
            state, reason = last.state, last.state_reason
        elif last.spot and last.state.alive:
            state, reason = InstanceState.PREEMPTED, EVICTED_DELETED
        else:
            state, reason = InstanceState.TERMINATED, last.state_reason or "deleted outside gpuorch"
        # ARM keeps no record of a deleted VM: its status time if it was seen stopped, else none (the
        # daemon bills a delete it asked for until its call, an eviction unseen until its look).
        tomb = last.model_copy(update={"state": state, "state_reason": reason, "host": None, "port": None,
                                       "ended_at": last.ended_at})
        self._tombstones[name] = (now + self.options.tombstone_s, tomb)
        return tomb

    def _runner_pool(self) -> Any:
        if self._runners is None:
            from gpuorch.agent.protocol import NoticeSource
            from gpuorch.provider import Runners

            self._runners = Runners(self.home, self.options.admin_user, self._runner_options, provider="azure",
                                    notice=NoticeSource(kind="azure"))
        return self._runners

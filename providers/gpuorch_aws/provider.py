"""``AwsProvider``: EC2 spot and on-demand instances and EBS volumes, through boto3.

boto3 is imported only when the provider is built (``from_config``), so the core never loads it
for a daemon without AWS. Every API call goes through ``calls.Ec2`` (retries, error translation);
request bodies come from ``requests``, responses are read by ``parse``, offers by ``offers``.
Instance and volume ids do not name their region: the region each was seen in is remembered,
and an unknown id is looked for in every configured region.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from gpuorch.errors import AuthError, NotFoundError, PermanentError, ProviderError, UserInputError
from gpuorch.provider import (
    Finding,
    Instance,
    LaunchRequest,
    NoticeSource,
    Offer,
    Provider,
    Runner,
    RunnerOptions,
    Runners,
    ScheduledStop,
    launch_cloud_config,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.port import TAG_NODE

from .calls import Ec2, RetryPolicy
from .config import AwsOptions, parse_options
from .gang import MAX_NODES, AwsGangs
from .images import Image, resolve_image
from .offers import BucketSource, CatalogPrices, PriceSource, fetch_offers
from .parse import (
    PROVIDER,
    earliest,
    reclaim_deadline,
    scheduled_stop,
    spot_end,
    spot_notice_deadline,
    to_instance,
    transition_time,
)
from .registry import EcrLogin
from .requests import attempt_filters, gang_run_instances_kwargs, managed_filters, run_instances_kwargs
from .volumes import EbsVolumes

log = logging.getLogger("gpuorch.aws")
T = TypeVar("T")
_ZONE_ID = re.compile(r"[a-z0-9]+-az\d+")  # use1-az4: the same place in every account, unlike us-east-1a
_BATCH = 100
_EPOCH = datetime.min.replace(tzinfo=UTC)


class AwsProvider(AwsGangs, EbsVolumes, EcrLogin, Provider):
    """Contract: ``gpuorch.provider.port.Provider``; also ``SupportsVolumes``; gangs (``nodes:``)
    in a cluster placement group (gang.py, ``gpuorch.provider.gang_cloud``)."""

    name = PROVIDER
    # The agent runs docker on the VM (docs/workloads.md) and logs it in to ECR (registry.py).
    capabilities = Capabilities(max_nodes=MAX_NODES, runs_containers=True, volume_attach_check=True,
                                disk_types=True, registry_login=True)

    def __init__(self, options: AwsOptions, *, home: Path | None = None, session: Any = None,
                 prices: PriceSource | None = None, buckets: BucketSource | None = None,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 runner_options: RunnerOptions | None = None, now: Callable[[], datetime] = utcnow) -> None:
        """``home``: where SSH keys live (``$GPUORCH_HOME``; without it, no runner). ``session``: a
        boto3 Session (default: a new one for ``options.profile``). ``prices`` and ``buckets``:
        on-demand prices and spot interruption buckets (default: the catalog).
        ``runner_options``: per-instance overrides of the SSH runner (address, python, agent env,
        notice source; see ``gpuorch.runners.pool.Runners``). For tests that stand local sshds in for instances;
        the daemon never sets it. ``now``: the wall clock that scheduled stops are compared with."""
        if session is None:
            import boto3

            session = boto3.Session(profile_name=options.profile)
        self.options = options
        catalog = CatalogPrices(options.catalog)
        self.prices: PriceSource = prices or catalog
        self.buckets: BucketSource = buckets or catalog.bucket
        policy = RetryPolicy(max_attempts=options.max_attempts, max_total_s=options.retry_max_s)
        self._ec2 = Ec2(session, endpoint_url=options.endpoint_url, policy=policy, sleep=sleep)
        self._monotonic, self._now = monotonic, now
        self.home = home
        self._runners = Runners(home, options.ssh_user, runner_options, provider="aws", notice=NoticeSource(kind="aws"))
        self._where: dict[str, str] = {}  # instance or volume id -> region
        self._ended: dict[str, datetime] = {}  # reclaimed spot instance -> its request's end time
        self._images: dict[str, Image] = {}
        self._subnets: dict[str, dict[str, str]] = {}  # region -> zone -> subnet
        self._zones: dict[str, dict[str, str]] = {}  # region -> zone id -> zone name
        self._offers: tuple[float, list[Offer]] | None = None

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> AwsProvider:
        """Build from ``providers.aws`` and check it against AWS now (``check``), so a bad region,
        AMI, subnet or credential fails at start with a UserInputError naming the option."""
        opts = parse_options(options)
        try:
            import boto3
        except ImportError:
            raise UserInputError("providers.aws: boto3 is not installed; pip install 'gpuorch[aws]'") from None
        try:
            session = boto3.Session(profile_name=opts.profile)
        except Exception as e:  # botocore ProfileNotFound
            raise UserInputError(f"providers.aws.profile: {e}; name a profile from ~/.aws/config") from None
        provider = cls(opts, home=Path(home), session=session)
        provider.check()
        return provider

    def check(self) -> None:
        """Resolve each region's AMI and subnets; UserInputError for what is missing or refused."""
        try:
            for region in self.options.regions:
                self._image(region)
                self._subnet_zones(region)
                if self.options.security_group_ids.get(region):
                    self._ec2.call(region, "describe_security_groups", GroupIds=self.options.security_group_ids[region])
        except AuthError as e:
            raise UserInputError(f"providers.aws: {e}") from None
        except PermanentError as e:
            raise UserInputError(f"providers.aws: {e}; fix the ids in providers.aws") from None

    def client(self, region: str) -> Any:
        """The region's boto3 EC2 client (for tests and tools; the adapter uses ``_ec2.call``)."""
        return self._ec2.client(region)

    # -- offers ------------------------------------------------------------------------------
    def offers(self) -> list[Offer]:
        """Offers of every configured region, cached ``offers_ttl_s``. A region that fails is left
        out (logged, and the result cached a minute only); if all fail, the first error is raised."""
        now = self._monotonic()
        if self._offers is not None and now < self._offers[0]:
            return list(self._offers[1])
        out: list[Offer] = []
        errors: list[ProviderError] = []
        for region in self.options.regions:
            try:
                zones = set(self._subnet_zones(region)) or None
                out += fetch_offers(self._ec2, region, self.prices, self.buckets, zones, utcnow())
            except ProviderError as e:
                log.warning("aws offers in %s unavailable: %s", region, e)
                errors.append(e)
        if errors and len(errors) == len(self.options.regions):
            raise errors[0]
        ttl = min(self.options.offers_ttl_s, 60.0) if errors else self.options.offers_ttl_s
        self._offers = (now + ttl, out)
        return list(out)

    # -- instances ---------------------------------------------------------------------------
    def launch(self, request: LaunchRequest) -> Instance:
        """See ``Provider.launch``. Looks for the attempt's tagged instance first (moto ignores
        ClientToken; EC2 honours it, which covers a crash between create and tag visibility).
        Node 0 of a gang (``request.nodes`` > 1) launches the whole gang (gang.py)."""
        if request.nodes > 1 and request.node == 0:
            return self._gang_launch(request)
        return self._launch_one(request)

    def _launch_one(self, request: LaunchRequest) -> Instance:
        o = request.offer
        self.check_offer(o)
        self._check_region(o.region)
        found = self._find_attempt(request)
        if found is not None:
            return found
        zone = self._zone(o.region, o.zone)
        image = self._image(o.region)
        try:
            kwargs = run_instances_kwargs(
                request, image_id=image.id, zone=zone, root_device=image.root_device,
                subnet_id=self._subnet_for(o.region, zone),
                security_group_ids=self.options.security_group_ids.get(o.region, ()),
                key_name=self.options.key_name, instance_profile=self.options.instance_profile,
                cloud_config=launch_cloud_config(self.home, request))
            if request.nodes > 1:
                kwargs = gang_run_instances_kwargs(kwargs, request)
        except ValueError as e:
            raise PermanentError(f"launch of job {request.job_id} attempt {request.attempt}: {e}",
                                 code="InvalidRequest") from None
        d = self._ec2.call(o.region, "run_instances", **kwargs)["Instances"][0]
        self._where[d["InstanceId"]] = o.region
        log.info("aws: launched %s (%s %s %s) for job %s attempt %s", d["InstanceId"], zone, o.instance_type,
                 "spot" if request.spot else "on-demand", request.job_id, request.attempt)
        return to_instance(d, o.region, tags=request.tags)

    def _find_attempt(self, request: LaunchRequest) -> Instance | None:
        region = request.offer.region
        filters = attempt_filters(request.job_id, request.attempt, request.owner)
        node = request.tags.get(TAG_NODE)  # a gang's node k, or a single instance (no node tag)
        found = [i for i in self._describe(region, Filters=filters)
                 if i.owner == request.owner and i.tags.get(TAG_NODE) == node]
        if not found:
            return None
        # One, unless EC2 lost a token: then the live one, else the newest.
        return max(found, key=lambda i: (i.state.alive, i.created_at or _EPOCH))

    def get(self, instance_id: str) -> Instance:
        """See ``Provider.get``; ``preemption_deadline`` from the spot notice, or from a scheduled
        stop within ``retirement_drain_s`` of it (``scheduled_stop`` tells of it before)."""
        region, d = self._describe_instance(instance_id)
        inst = self._instances(region, [d])[0]
        return self._gang_observe(inst) if TAG_NODE in inst.tags else inst

    def list_managed(self) -> list[Instance]:
        """See ``Provider.list_managed``: every region, ``tag:gpuorch:managed=true``, any owner; a
        gang as its node 0. Sweeps the placement groups of ended gangs (gang.py)."""
        listed = [i for region in self.options.regions for i in self._describe(region, Filters=managed_filters())]
        return self._gang_present(listed)

    def terminate(self, instance_id: str) -> None:
        """See ``Provider.terminate``: quiet if EC2 does not know the id in any configured region.
        A gang's node: every node, then its placement group."""
        self._runners.forget(instance_id)
        try:
            region, d = self._describe_instance(instance_id)
        except NotFoundError:
            return
        inst = to_instance(d, region)
        if TAG_NODE in inst.tags:
            self._gang_terminate(inst)
            return
        try:
            self._find(instance_id, lambda r: self._ec2.call(r, "terminate_instances", InstanceIds=[instance_id])
                       .get("TerminatingInstances", []))
        except NotFoundError:
            return

    def runner(self, instance: Instance) -> Runner:
        """An SSH runner to ``instance`` as ``ssh_user``, its host key pinned (see ``ssh.py``).
        Raises RunnerUnavailable while the instance has no address. A gang: one runner per node,
        node 0's private address as ``MASTER_ADDR`` (``gang_cloud.GangRunner``)."""
        if TAG_NODE in instance.tags:
            return self._gang_runner(instance)
        return self._runners.get(instance)

    def doctor(self) -> list[Finding]:
        """``SupportsDoctor``: credentials through the SDK's standard chain and each permission the
        adapter needs, one cheap call apiece (``doctor.py``); never prints a secret."""
        from .doctor import doctor

        return doctor(self)

    def close(self) -> None:
        self._runners.close()

    # -- helpers -----------------------------------------------------------------------------
    def _describe(self, region: str, **params: Any) -> list[Instance]:
        reservations = self._ec2.pages(region, "describe_instances", "Reservations", **params)
        return self._instances(region, [i for r in reservations for i in r["Instances"]])

    def _describe_instance(self, instance_id: str) -> tuple[str, dict[str, Any]]:
        return self._find(instance_id, lambda r: [
            i for res in self._ec2.call(r, "describe_instances", InstanceIds=[instance_id])["Reservations"]
            for i in res["Instances"]])

    def _instances(self, region: str, descs: list[dict[str, Any]]) -> list[Instance]:
        """Descriptions -> Instances, with the scheduled stops and preemption deadlines of the live ones."""
        alive = [d for d in descs if d["State"]["Name"] in ("pending", "running")]
        deadlines: dict[str, datetime | None] = {}
        stops: dict[str, ScheduledStop | None] = {}
        now = self._now()
        ids = [d["InstanceId"] for d in alive]
        for i in range(0, len(ids), _BATCH):
            try:
                statuses = self._ec2.call(region, "describe_instance_status", InstanceIds=ids[i:i + _BATCH])
            except NotFoundError:  # one of them ended meanwhile: no notice to read this time
                continue
            for s in statuses.get("InstanceStatuses", []):
                stop = stops[s["InstanceId"]] = scheduled_stop(s.get("Events") or (), self.options.retirement_drain_s)
                deadlines[s["InstanceId"]] = reclaim_deadline(stop, now)
        requests = {d["SpotInstanceRequestId"]: d["InstanceId"] for d in alive if d.get("SpotInstanceRequestId")}
        sirs = list(requests)
        for i in range(0, len(sirs), _BATCH):
            for sir in self._ec2.call(region, "describe_spot_instance_requests",
                                      SpotInstanceRequestIds=sirs[i:i + _BATCH]).get("SpotInstanceRequests", []):
                iid = requests.get(sir["SpotInstanceRequestId"], "")
                deadlines[iid] = earliest(deadlines.get(iid), spot_notice_deadline(sir.get("Status")))
        ended = self._spot_ends(region, [d for d in descs if d["State"]["Name"] not in ("pending", "running")])
        for d in descs:
            self._where[d["InstanceId"]] = region
        return [to_instance(d, region, deadlines.get(d["InstanceId"]), stop=stops.get(d["InstanceId"]),
                            ended=ended.get(d["InstanceId"])) for d in descs]

    def _spot_ends(self, region: str, ended: list[dict[str, Any]]) -> dict[str, datetime]:
        """When EC2 ended each reclaimed spot instance whose description dates nothing: its spot
        request's status time, kept once known (an ended instance's record is final)."""
        ask = {d["SpotInstanceRequestId"]: d["InstanceId"] for d in ended
               if d.get("SpotInstanceRequestId") and d["InstanceId"] not in self._ended
               and transition_time(d.get("StateTransitionReason")) is None}
        sirs = list(ask)
        for i in range(0, len(sirs), _BATCH):
            try:
                found = self._ec2.call(region, "describe_spot_instance_requests",
                                       SpotInstanceRequestIds=sirs[i:i + _BATCH])
            except NotFoundError:  # a request EC2 no longer keeps: nothing to date the end with
                found = {}
            for sir in found.get("SpotInstanceRequests", []):
                if (end := spot_end(sir.get("Status"))) is not None:  # undated yet: asked again next time
                    self._ended[ask.get(sir["SpotInstanceRequestId"], "")] = end
        out = {d["InstanceId"]: self._ended[d["InstanceId"]] for d in ended if d["InstanceId"] in self._ended}
        if len(self._ended) > 100_000:  # a long life: forget (asking again is harmless)
            self._ended.clear()
        return out

    def _find(self, resource_id: str, lookup: Callable[[str], list[T]]) -> tuple[str, T]:
        """(region, first item) from ``lookup(region)`` in the region the id was seen in, else in
        each configured region; NotFoundError if none has it."""
        regions = [self._where[resource_id]] if resource_id in self._where else self.options.regions
        for region in regions:
            try:
                items = lookup(region)
            except NotFoundError:
                continue
            if items:
                return region, items[0]
        raise NotFoundError(f"aws: {resource_id} not found in {', '.join(regions)}", code="NotFound")

    def _check_region(self, region: str) -> None:
        if region not in self.options.regions:
            raise PermanentError(f"aws region {region} is not in providers.aws.regions {self.options.regions}",
                                 code="RegionNotConfigured")

    def _image(self, region: str) -> Image:
        if region not in self._images:
            self._images[region] = resolve_image(self._ec2, region, self.options.ami.get(region), self.options.ami_name)
        return self._images[region]

    def _zone(self, region: str, zone: str) -> str:
        """The zone *name* EC2 calls wants, for a zone name or a zone id (the catalog's ``use1-az4``)."""
        if _ZONE_ID.fullmatch(zone):
            if region not in self._zones:
                azs = self._ec2.call(region, "describe_availability_zones")["AvailabilityZones"]
                self._zones[region] = {z["ZoneId"]: z["ZoneName"] for z in azs}
            if zone not in self._zones[region]:
                raise PermanentError(f"zone {zone} is not in {region}", code="InvalidZone")
            return self._zones[region][zone]
        if not zone.startswith(region):
            raise PermanentError(f"zone {zone} is not in {region}", code="InvalidZone")
        return zone

    def _subnet_zones(self, region: str) -> dict[str, str]:
        """zone -> configured subnet of ``region`` (empty: the default VPC's subnets)."""
        ids = self.options.subnet_id.get(region)
        if ids and region not in self._subnets:
            subnets = self._ec2.call(region, "describe_subnets", SubnetIds=ids)["Subnets"]
            self._subnets[region] = {s["AvailabilityZone"]: s["SubnetId"] for s in subnets}
        return self._subnets.get(region, {})

    def _subnet_for(self, region: str, zone: str) -> str | None:
        subnets = self._subnet_zones(region)
        if subnets and zone not in subnets:
            raise PermanentError(f"no subnet of providers.aws.subnet_id.{region} is in {zone}; add one there",
                                 code="NoSubnetInZone")
        return subnets.get(zone)

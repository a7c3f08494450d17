"""``SshPoolProvider``: GPU servers the user owns, reached over SSH, as a provider (docs/ssh-pools.md).

An "instance" is a lease of some of one host's GPU slots, held in the state store under the
launch's client token (``gpuorch.provider.slots``): every daemon of the installation sees the
same leases, so a host never runs more than it has. Its agent and job run through the SSH
runner in a directory of their own on the host (``<remote_root>/<token>``), seeing only their
GPUs (``CUDA_VISIBLE_DEVICES``). Terminating ends the lease; the next check of the host stops
its processes (SIGTERM, then SIGKILL after ``stop_grace_s``) and, once none is left, releases the
slots; the directory stays an hour. A host whose checks fail for ``silent_after_s`` is silent:
its leases end, so the daemon counts their jobs lost and launches them elsewhere; their slots
come free once the host answers again and their processes are gone.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, UserInputError
from gpuorch.provider import (
    Finding,
    Instance,
    InstanceState,
    LaunchRequest,
    NoticeSource,
    Offer,
    Provider,
    Runner,
    utcnow,
)
from gpuorch.provider.capabilities import Capabilities
from gpuorch.provider.slots import SlotLease, SlotLedger, SlotRequest
from gpuorch.runners.connection import SshConnection
from gpuorch.runners.ssh import SshRunner

from .config import PROVIDER, Host, PoolOptions, parse_options
from .doctor import host_findings
from .hosts import HostWatch, connect, user_known_keys
from .offers import host_offers

POOL_DIR = "ssh-pool"  # under the daemon's home: the pool's pinned host keys
PRUNE_AFTER = timedelta(hours=1)  # released leases kept this long (their tokens still name them)


class SshPoolProvider(Provider):
    """Contract: ``gpuorch.provider.port.Provider``; also ``UsesSlotLedger`` and ``SupportsDoctor``."""

    name = PROVIDER
    # Owned: priced at the configured rate, 0 by default. An ended instance's directory (agent
    # status, job log) stays on its host an hour: the daemon still reads how its job ended after a
    # terminate it did not record (a crash between the two). A launch is one store transaction;
    # the host is reached by the runner.
    capabilities = Capabilities(owned_capacity=True, runner_outlives_instance=True, launches_may_block=False)

    def __init__(self, opts: PoolOptions, hosts: list[Host], home: Path) -> None:
        self.opts, self.home = opts, Path(home)
        self.hosts = {h.zone: h for h in hosts}
        self.by_address = {h.address.key: h for h in hosts}
        self.ledger: SlotLedger | None = None
        self._runners: dict[str, SshRunner] = {}
        self._pruned_at = utcnow()
        pool = self.home / POOL_DIR
        self.watch = HostWatch(hosts, pool / "known_hosts", opts.known_hosts.expanduser(),
                               interval_s=opts.check_interval_s, silent_after_s=opts.silent_after_s,
                               connect_timeout_s=opts.connect_timeout_s, grace_s=opts.stop_grace_s,
                               stopping=self._stopping, gone=self._gone)
        self._first_check = True

    @classmethod
    def from_config(cls, options: dict[str, Any], home: Path) -> SshPoolProvider:
        """Build from ``providers.ssh``; UserInputError (one line naming the field and the fix) for a
        malformed option, a login key that is not a readable file, or a host with no key to trust."""
        opts, hosts = parse_options(options)
        known = opts.known_hosts.expanduser()
        for h in hosts:
            if not h.key_path.is_file():
                raise UserInputError(f"{h.field}.key: {h.key_path} is not a file; give the path of the private key "
                                     "gpuorch logs in with")
            if not h.host_keys and not user_known_keys(known, h.address.host, h.address.port):
                raise UserInputError(
                    f"{h.field}.host_key: no key for {h.address.key} in {known} (providers.{PROVIDER}.known_hosts); "
                    "add the host's key there, checked against its console, or set host_key")
            jump = h.proxy_jump
            if jump is not None and not any(p.address.key == jump.key and p.host_keys for p in hosts) \
                    and not user_known_keys(known, jump.host, jump.port):
                raise UserInputError(
                    f"{h.field}.proxy_jump: no key for the jump host {jump.key} in {known}; add its key there, "
                    "checked against its console")
        return cls(opts, hosts, home)

    @classmethod
    def catalog_offers(cls, options: dict[str, Any], home: Path) -> list[Offer]:
        """Every slot count of every host's declared GPUs, all free (``submit``'s fit check; no SSH)."""
        opts, hosts = parse_options(options)
        return [o for h in hosts if h.gpus is not None
                for o in host_offers(h, opts.region, (h.gpus,), {h.gpus.gpu: h.gpus.indexes}, 0, 0.0)]

    def use_slot_ledger(self, ledger: SlotLedger) -> None:
        self.ledger = ledger

    # -- the port ------------------------------------------------------------------------------

    def offers(self) -> list[Offer]:
        """Every slot count of every GPU model of each host whose last check passed, at its price
        (no spot market). Capacity, as a cloud's catalog is: the daemon caches offers for minutes,
        so which slots are free is decided by the lease at launch (NoCapacityError when taken)."""
        self._refresh()
        out: list[Offer] = []
        now = utcnow()
        for zone, host in self.hosts.items():
            state = self.watch.state(zone)
            if state.ok and not self.watch.silent(zone, now):
                out += host_offers(host, self.opts.region, state.gpus, {g.gpu: g.indexes for g in state.gpus},
                                   state.cpus, state.memory_gib)
        return out

    def free_slots(self) -> dict[str, int]:
        """Host zone -> GPUs not leased now (``doctor`` with a ledger; offers list capacity)."""
        held = self._held()
        return {zone: sum(1 for g in self.watch.state(zone).gpus for i in g.indexes
                          if i not in held.get(host.address.key, set()))
                for zone, host in self.hosts.items()}

    def launch(self, request: LaunchRequest) -> Instance:
        """Lease the offer's GPU count on its host for the request's client token; see ``Provider.launch``.
        NoCapacityError when the host is not answering or its slots are taken."""
        self.check_offer(request.offer)
        ledger = self._ledger()
        token = request.client_token
        held = ledger.get(token)
        if held is not None:
            return self._instance(held)
        offer = request.offer
        host = self.hosts.get(offer.zone)
        if host is None:
            raise PermanentError(f"{offer.zone} is not a host of providers.{PROVIDER}", code="InvalidOffer")
        if request.spot or request.nodes > 1:
            raise PermanentError(f"{offer.zone}: an SSH pool host has no spot market and places one node",
                                 code="InvalidOffer")
        state = self.watch.state(host.zone)
        if not state.ok or self.watch.silent(host.zone, utcnow()):
            raise NoCapacityError(f"{host.address} is not answering: {state.error or 'not checked yet'}",
                                  code="HostUnavailable")
        group = next((g for g in state.gpus if g.gpu == offer.gpu), None)
        if group is None or len(group.indexes) < offer.gpu_count:
            raise NoCapacityError(f"{host.address} has no {offer.gpu_count} x {offer.gpu} now", code="SlotsTaken")
        lease = ledger.acquire(SlotRequest(
            token=token, host=host.address.key, candidates=group.indexes, count=offer.gpu_count, zone=host.zone,
            region=offer.region, instance_type=offer.instance_type, tags=request.tags), utcnow())
        return self._instance(lease)

    def get(self, instance_id: str) -> Instance:
        lease = self._ledger().get(instance_id)
        if lease is None:
            raise NotFoundError(f"no SSH pool instance {instance_id!r}")
        return self._instance(self._settle(lease))

    def list_managed(self) -> list[Instance]:
        """Every lease (ended ones until pruned, an hour after their release). Starts the due host
        checks; a lease on a host silent for ``silent_after_s`` ends here."""
        self._refresh()
        ledger = self._ledger()
        now = utcnow()
        if now - self._pruned_at >= PRUNE_AFTER / 4:
            ledger.prune(now - PRUNE_AFTER)
            self._pruned_at = now
        return [self._instance(self._settle(lease)) for lease in ledger.leases()]

    def terminate(self, instance_id: str) -> None:
        """End the lease now; the next check of its host (soon) stops its processes and frees its slots."""
        ledger = self._ledger()
        lease = ledger.get(instance_id)
        if lease is None or lease.ended_at is not None:
            return
        ledger.end(instance_id, utcnow(), "terminated")
        runner = self._runners.pop(instance_id, None)
        if runner is not None:
            runner.close()
        host = self.by_address.get(lease.host)
        if host is not None:
            self.watch.soon(host.zone)

    def runner(self, instance: Instance) -> Runner:
        """The SSH runner of the instance's own directory on its host, seeing only its GPUs."""
        cached = self._runners.get(instance.id)
        if cached is not None:
            return cached
        lease = self._ledger().get(instance.id)
        host = self.by_address.get(lease.host) if lease is not None else None
        if lease is None or host is None:
            raise NotFoundError(f"no SSH pool instance {instance.id!r} on a configured host")
        runner = SshRunner(
            host.address.host, host.address.port, host.address.user, host.key_path, self.watch.known_hosts,
            remote_root=f"{host.remote_root}/{lease.token}", python=host.python, notice=NoticeSource(kind="none"),
            agent_env={"CUDA_VISIBLE_DEVICES": ",".join(str(s) for s in lease.slots)},
            connect_timeout=self.opts.connect_timeout_s, connect_attempts=2, retry_wait_s=0.5, retry_wait_max_s=2.0,
            before_connect=lambda: _pinned(self.watch, host),
        )
        if host.proxy_jump is not None:  # the same connection, through the jump host
            runner.connection = connect(host, self.watch.known_hosts, **_connection_knobs(runner.connection))
        self._runners[instance.id] = runner
        return runner

    def doctor(self) -> list[Finding]:
        """Each host: reachable, its host key verified, its GPUs (declared or detected)."""
        self.watch.refresh(wait_s=self.watch.first_wait_s(), force=True)
        free = self.free_slots() if self.ledger is not None else {}
        return [f for host in self.hosts.values()
                for f in host_findings(host, self.watch.state(host.zone), free.get(host.zone))]

    def close(self) -> None:
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()
        self.watch.close()

    # -- leases --------------------------------------------------------------------------------

    def _ledger(self) -> SlotLedger:
        if self.ledger is None:
            raise PermanentError(f"providers.{PROVIDER} leases GPU slots in the state store: it launches only inside "
                                 "the daemon, which hands it the store", code="NoSlotLedger")
        return self.ledger

    def _held(self) -> dict[str, set[int]]:
        """host key -> slots held by unreleased leases (none without a ledger: `gpuorch offers`)."""
        out: dict[str, set[int]] = {}
        for lease in self.ledger.leases() if self.ledger is not None else []:
            if lease.released_at is None:
                out.setdefault(lease.host, set()).update(lease.slots)
        return out

    def _settle(self, lease: SlotLease) -> SlotLease:
        """End a live lease whose host went silent (dated at its last good check)."""
        host = self.by_address.get(lease.host)
        if lease.ended_at is not None or host is None:
            return lease
        now = utcnow()
        if not self.watch.silent(host.zone, now):
            return lease
        state = self.watch.state(host.zone)
        at = max(lease.created_at, state.last_ok_at or state.failing_since or now)
        why = f"host {host.address} silent since {at:%Y-%m-%d %H:%M:%S}Z: {state.error}"
        self._ledger().end(lease.token, at, why)
        return self._ledger().get(lease.token) or lease

    def _stopping(self, host: Host) -> list[str]:
        if self.ledger is None:
            return []
        return [lease.token for lease in self.ledger.leases()
                if lease.host == host.address.key and lease.ended_at is not None and lease.released_at is None]

    def _gone(self, host: Host, tokens: list[str]) -> None:
        if self.ledger is not None:
            for token in tokens:
                self.ledger.release(token, utcnow())

    def _refresh(self) -> None:
        """Start the due checks; the very first time, wait for them (offers need the hosts' GPUs)."""
        first, self._first_check = self._first_check, False
        self.watch.refresh(wait_s=self.watch.first_wait_s() if first else 0.0)

    def _instance(self, lease: SlotLease) -> Instance:
        host = self.by_address.get(lease.host)
        ended = lease.ended_at is not None
        address = host.address if host is not None else None
        return Instance(
            id=lease.token, provider=PROVIDER, region=lease.region, zone=lease.zone,
            instance_type=lease.instance_type, spot=False,
            state=InstanceState.TERMINATED if ended else InstanceState.RUNNING, tags=dict(lease.tags),
            created_at=lease.created_at, host=address.host if address else None, port=address.port if address else None,
            state_reason=lease.end_reason, ended_at=lease.ended_at)


def _pinned(watch: HostWatch, host: Host) -> None:
    """Pin the host's trusted keys before each new connection (a changed known_hosts takes effect)."""
    watch.pin(host)


def _connection_knobs(conn: SshConnection) -> dict[str, Any]:
    return {"connect_timeout": conn.connect_timeout, "connect_attempts": conn.connect_attempts,
            "retry_wait_s": conn.retry_wait_s, "retry_wait_max_s": conn.retry_wait_max_s,
            "io_timeout": conn.io_timeout, "before_connect": conn.before_connect}

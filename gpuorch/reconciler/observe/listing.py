"""What a pass observes before it decides: the providers' offers (cached for a TTL, with their
index), the instances every provider has tagged for this installation (one ``list_managed``
per provider per pass: a batched read, never one call per job), and the back-offs in force.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from sqlmodel import select

from gpuorch.errors import AuthError, ProviderError
from gpuorch.placement import Candidate, KeyedAvoid, OfferIndex
from gpuorch.provider.port import Instance, Offer, Provider
from gpuorch.reconciler.observe.credentials import CredentialAlarm
from gpuorch.store import Store
from gpuorch.store.models import Backoff

log = logging.getLogger("gpuorch.reconciler")

Key = tuple[str, int, int]  # (provider, job id, attempt number)


def backoff_key(provider: str, region: str = "", instance_type: str = "", spot: bool | None = None) -> str:
    """The ``backoff`` table's key of an offer class (``Launching`` writes it, ``Backoffs`` reads it)."""
    parts = [provider, region, instance_type] + ([] if spot is None else ["spot" if spot else "on-demand"])
    return "/".join(p for p in parts if p)


class OfferCache:
    """Every provider's offers, refreshed after ``ttl_s``. A provider whose refresh fails keeps
    its previous offers and is asked again next pass (not after the TTL). ``current`` returns
    the same list object until a refresh succeeds, so callers may memoise on it; ``index`` is
    the one ``OfferIndex`` of that list, built once per refresh and kept across passes (its
    memoised fits and placements with it). A provider in ``price_lists`` (the daemon's
    ``catalog_files``, ``gpuorch.provider.pricelists``) is priced from those offers instead of
    its own ``offers()``. ``alarm``: told of a provider refusing its credentials (``AuthError``),
    which the pass's listing and the runners' starts share (``credentials.py``)."""

    def __init__(self, providers: Mapping[str, Provider], ttl_s: float, alarm: CredentialAlarm | None = None) -> None:
        self.providers, self.ttl_s, self.alarm = providers, ttl_s, alarm
        self.by_provider: dict[str, list[Offer]] = {}
        self.at: dict[str, datetime] = {}
        self._flat: list[Offer] | None = None
        self._index: OfferIndex | None = None
        self.price_lists: Mapping[str, list[Offer]] = {}

    def current(self, now: datetime) -> list[Offer]:
        for name, p in self.providers.items():
            at = self.at.get(name)
            if at is not None and (now - at).total_seconds() < self.ttl_s:
                continue
            try:
                listed = self.price_lists.get(name)
                fresh = p.offers() if listed is None else listed
                if fresh != self.by_provider.get(name):  # the same catalog again keeps the index
                    self._flat = None
                self.by_provider[name], self.at[name] = fresh, now
            except ProviderError as e:
                log.warning("offers from %s unavailable this pass (keeping %d known): %s", name,
                            len(self.by_provider.get(name, [])), e)
                if isinstance(e, AuthError) and self.alarm is not None:
                    self.alarm.refused(name, "listing offers", e)
        if self._flat is None:
            self._flat = [o for offers in self.by_provider.values() for o in offers]
            self._index = None
        return self._flat

    def index(self) -> OfferIndex:
        """The index of the list ``current`` last returned: rebuilt only when that list is."""
        if self._index is None:
            self._index = OfferIndex(self._flat or [])
        return self._index

    def invalidate(self) -> None:
        self.at.clear()

    @property
    def complete(self) -> bool:
        """Whether every provider's catalog is known (else "no offer" may be a blip)."""
        return len(self.by_provider) >= len(self.providers)

    @property
    def seen_at(self) -> datetime | None:
        return max(self.at.values(), default=None)


def list_instances(providers: Mapping[str, Provider], installation_id: str,
                   keys: dict[int, tuple[Instance, Key | None]] | None = None,
                   alarm: CredentialAlarm | None = None) -> tuple[dict[Key, Instance], set[str]]:
    """Instances of this installation by (provider, job, attempt), and the providers listed OK.
    Of several instances for one key (there should be none), a live one wins. ``keys``: each
    instance's key (None: not this installation's) by object, from the last call; replaced by this
    call's. Providers hand out the same object while an instance is unchanged (the sim does), so
    its tags are parsed once, not every pass. ``alarm``: told of a provider refusing its credentials."""
    found: dict[Key, Instance] = {}
    ok: set[str] = set()
    before = keys.copy() if keys else {}
    if keys is not None:
        keys.clear()
    for name, p in providers.items():
        try:
            listed = p.list_managed()
        except ProviderError as e:
            log.warning("cannot list %s instances this pass: %s", name, e)
            if isinstance(e, AuthError) and alarm is not None:
                alarm.refused(name, "listing instances", e)
            continue
        ok.add(name)
        for inst in listed:
            got = before.get(id(inst))
            if got is not None and got[0] is inst:
                key = got[1]
            elif inst.owner == installation_id and (job_id := inst.job_id) is not None \
                    and (attempt := inst.attempt) is not None:
                key = (name, job_id, attempt)
            else:
                key = None
            if keys is not None:
                keys[id(inst)] = (inst, key)  # the instance is kept with its id: the id is not reused meanwhile
            if key is not None and (key not in found or inst.state.alive):
                found[key] = inst
    return found, ok


class Backoffs:
    """The back-offs in force (``read``), as a predicate keyed by their set (None: there are none):
    placements are memoised across jobs and passes until a back-off starts or ends
    (``placement.candidates``). A full ranking may ask it about every offer: a candidate of a
    provider no key names is let through without building a key.

    The rows are read again only when the store changed (``Store.data_version``, as the pass's
    claim read it before reading anything); between, a back-off whose ``until`` passed drops out,
    and the same predicate object is handed out while the set is the same. ``until``: when the
    first back-off in force ends (the set changes then with no write; None: none in force)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._rows: list[tuple[str, datetime]] | None = None
        self._version: int | None = None
        self._last: KeyedAvoid | None = None
        self.until: datetime | None = None

    def read(self, now: datetime, version: int | None = None) -> KeyedAvoid | None:
        if self._rows is None or version is None or version != self._version:
            with self.store.read() as s:
                self._rows = [(k, u) for k, u in s.exec(select(Backoff.key, Backoff.until).where(Backoff.until > now))]
            self._version = version
        keys = frozenset(k for k, until in self._rows if until > now)  # UTCDateTime: aware
        self.until = min((until for _, until in self._rows if until > now), default=None)
        if not keys:
            return None
        if self._last is None or self._last.key != keys:
            self._last = keyed_avoid(keys)
        return self._last


def keyed_avoid(keys: frozenset[str]) -> KeyedAvoid:
    named = {k.split("/", 1)[0] for k in keys}  # every key starts with its provider

    def avoid(c: Candidate) -> bool:
        o = c.offer
        return o.provider in named and (
            o.provider in keys or backoff_key(o.provider, o.region) in keys
            or backoff_key(o.provider, o.region, o.instance_type, c.spot) in keys)

    return KeyedAvoid(keys, avoid)

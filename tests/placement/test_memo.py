"""Placements memoised on the offer index: equal to a fresh ranking, keyed by what placement reads."""

from __future__ import annotations

import random

from gpuorch.placement import KeyedAvoid, OfferIndex, candidates, placement_key, plan


def _catalog(offer):  # a few classes over many zones, spot and on-demand
    rng = random.Random(7)
    out = []
    for z in range(40):
        for inst, gpu, count, price in (("g5", "A10G", 1, 1.0), ("p4d", "A100", 8, 32.0), ("a2", "A100", 1, 3.7),
                                        ("g6", "L4", 1, 0.8), ("p5", "H100", 8, 98.0)):
            out.append(offer(inst, gpu, round(price * rng.uniform(0.9, 1.1), 4), count=count,
                             spot=round(price * rng.uniform(0.3, 0.5), 4), zone=f"z{z}", region=f"r{z % 7}",
                             provider="aws" if z % 2 else "gcp", bucket=rng.choice(["<5%", ">20%", None])))
    return out


SPECS = [
    {},
    {"resources": {"gpu": "A100:8"}},
    {"resources": {"gpu": "A100:1"}, "spot_policy": "spot"},
    {"resources": {"gpu": "A100:1"}, "spot_policy": "on-demand"},
    {"resources": {"gpu": "A100:1"}, "max_price_per_hour": 3.8},
    {"resources": {"gpu": "A100:1"}, "regions": ["r1", "r2"]},
    {"resources": {"gpu": "A100:1"}, "providers": ["gcp"]},
    {"resources": {"gpu": "A100:1"}, "checkpoint": {"store": "s3://b/x", "interval": "10m"}},
    {"resources": {"gpu": "A100:1"}, "checkpoint": {"store": "gs://b/x", "interval": "10m"}},
    {"resources": {"gpu": "A100:1"}, "checkpoint": {"store": "s3://b/x", "interval": "1h"}},
    {"resources": {"gpu": "L4", "cpus": 4}},
    {"resources": {"gpu": "A100:1"}, "spot_policy": "spot", "spot_price": "listed"},
    {"model": {"params": "8B", "method": "qlora", "tokens": "20M"}},
    {"model": {"params": "8B", "method": "qlora", "tokens": "50M"}},
]


def test_memoised_placements_equal_a_fresh_ranking_for_every_placement_field(offer, job):
    idx = OfferIndex(_catalog(offer))
    avoid = KeyedAvoid(frozenset({"aws/r3"}), lambda c: (c.offer.provider, c.offer.region) == ("aws", "r3"))
    for _ in range(2):  # the second round is served from the memo
        for fields in SPECS:
            for zone in (None, "z4"):
                for limit in (None, 3):
                    spec = job(**fields)
                    fresh = plan(spec, OfferIndex(idx.offers), avoid=avoid, volume_zone=zone, limit=limit,
                                 explain=False).candidates
                    assert candidates(spec, idx, avoid=avoid, volume_zone=zone, limit=limit) == fresh, fields
    assert len({placement_key(job(**f)) for f in SPECS}) == len(SPECS)  # each field is part of the key
    # a field added to the spec later is part of it unless named in NOT_PLACEMENT


def test_jobs_with_the_same_needs_cost_one_ranking(offer, job):
    idx = OfferIndex(_catalog(offer))
    first = candidates(job(name="a", run="x", resources={"gpu": "A10G"}), idx, limit=5)
    again = candidates(job(name="b", run="y", env={"K": "v"}, resources={"gpu": "A10G"}), idx, limit=5)
    assert again == first and len(idx.placed) == 1
    again.reverse()  # callers get their own list
    assert candidates(job(resources={"gpu": "A10G"}), idx, limit=5) == first


def test_a_new_avoid_key_ranks_again_and_a_plain_predicate_is_never_memoised(offer, job):
    idx = OfferIndex(_catalog(offer))
    spec = job(resources={"gpu": "A10G"})
    best = candidates(spec, idx, limit=1)[0]
    zone = best.offer.zone
    avoided = candidates(spec, idx, avoid=KeyedAvoid(zone, lambda c: c.offer.zone == zone), limit=1)[0]
    assert avoided.offer.zone != zone
    assert candidates(spec, idx, avoid=lambda c: c.offer.zone == zone, limit=1)[0].offer.zone != zone
    assert len(idx.placed) == 2  # None and the keyed one; the plain predicate left no entry

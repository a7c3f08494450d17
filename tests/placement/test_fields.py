"""Every JobSpec field is classified for the placement memo (``placement.PLACEMENT`` or
``NOT_PLACEMENT``), so a new field cannot be forgotten; and a field said not to be placement's
really leaves the ranking as it was (else two jobs differing in it would share a wrong answer)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.jobs.spec import JobSpec
from gpuorch.placement import NOT_PLACEMENT, PLACEMENT, OfferIndex, candidates, placement_key, plan

# A value other than the default for each field placement does not read (a valid spec with it).
NOT_PLACEMENT_VALUES: dict[str, dict[str, Any]] = {
    "name": {"name": "other"},
    "run": {"run": "python other.py"},
    "setup": {"setup": "pip install -r requirements.txt"},
    "workdir": {"workdir": "."},
    "env": {"env": {"LR": "0.1"}},
    "retry": {"retry": {"max_preemptions": 2, "max_failures": 3}},
    "recovery": {"recovery": {"strategy": "same-region-first"}},
    "budget": {"budget": {"max_cost": 5}},
    "deadline": {"deadline": {"at": "8h", "job_hours": 1}},
    "volume": {"volume": {"size": 10, "mount": "/data"}},
    "max_wait": {"max_wait": "10m", "deadline": {"at": "8h", "job_hours": 1}},
    "keep_warm": {"keep_warm": "10m"},
    "kind": {"kind": "dev"},
    "max_duration": {"max_duration": "2h"},
    "idle_stop": {"idle_stop": "30m", "kind": "dev"},
    "idle_gpu_util": {"idle_gpu_util": 20},
    "notify": {"notify": {"routes": ["ops"], "silence": ["job.succeeded"]}},
}


def _catalog(offer):  # a few classes over a few zones, spot and on-demand, two providers
    return [offer(inst, gpu, price * (1 + z / 50), count=count, spot=price * (0.3 + z / 40), zone=f"z{z}",
                  region=f"r{z % 3}", provider="aws" if z % 2 else "gcp", bucket=("<5%", ">20%", None)[z % 3])
            for z in range(8)
            for inst, gpu, count, price in (("g5", "A10G", 1, 1.0), ("a2", "A100", 1, 3.7), ("p4d", "A100", 8, 32.0),
                                            ("g6", "L4", 1, 0.8))]


BASES = [{"resources": {"gpu": "A100:1"}}, {"resources": {"gpu": "A100:1"}, "spot_policy": "spot"},
         {"model": {"params": "8B", "method": "qlora", "tokens": "20M"}}]


def test_every_spec_field_is_placement_or_not_never_both():
    fields = set(JobSpec.model_fields)
    assert not PLACEMENT & NOT_PLACEMENT, "a field is both placement's and not"
    unclassified = fields - PLACEMENT - NOT_PLACEMENT
    assert not unclassified, (f"JobSpec fields {sorted(unclassified)} are in neither placement.PLACEMENT nor "
                              "NOT_PLACEMENT: add each to the one that says whether candidates() reads it")
    assert fields >= (PLACEMENT | NOT_PLACEMENT), "a classified name is no JobSpec field"


def test_every_field_left_out_of_the_key_has_a_value_here():
    assert set(NOT_PLACEMENT_VALUES) == NOT_PLACEMENT


@pytest.mark.parametrize("field", sorted(NOT_PLACEMENT))
def test_a_field_left_out_of_the_key_leaves_the_ranking_as_it_was(field, job, offer):
    idx = OfferIndex(_catalog(offer))
    for base in BASES:
        plain, other = job(**base), job(**{**base, **NOT_PLACEMENT_VALUES[field]})
        assert getattr(other, field) != getattr(plain, field), field  # the value is really another
        assert placement_key(other) == placement_key(plain)
        fresh = plan(other, OfferIndex(idx.offers), limit=5, explain=False).candidates
        assert fresh == plan(plain, OfferIndex(idx.offers), limit=5, explain=False).candidates
        assert candidates(other, idx, limit=5) == fresh  # served from plain's memo when it ranked first


def test_a_placement_field_is_part_of_the_key(job):
    plain = job(resources={"gpu": "A100:1"})
    for fields in ({"spot_policy": "spot"}, {"image": "python:3.11"}, {"nodes": 2}, {"regions": ["r1"]}):
        assert placement_key(job(resources={"gpu": "A100:1"}, **fields)) != placement_key(plain), fields

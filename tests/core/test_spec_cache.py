"""``Specs``: a stored spec parsed once per value; jobs whose specs differ only in their names share
the parse, and every job still gets exactly what ``load_stored`` gives."""

from __future__ import annotations

import json

import pytest

from gpuorch.jobs.spec import load_stored, parse_spec
from gpuorch.reconciler.observe.rows import Specs

SHAPE = {"run": "python train.py", "resources": {"gpu": "A100"}, "env": {"NAME": '"name":"x",'},
         "checkpoint": {"store": "s3://bucket/run", "interval": "10m"}, "max_duration": 7200}


def stored(name: str, **more: object) -> str:
    return parse_spec({"name": name, **SHAPE, **more}).model_dump_json()


def test_specs_that_differ_only_in_their_names_are_parsed_once():
    specs = Specs()
    first = specs.load(stored("job-1"))
    second = specs.load(stored("job-2"))
    assert second == load_stored(stored("job-2"))
    assert second.name == "job-2" and first.name == "job-1"
    assert second.__pydantic_fields_set__ == load_stored(stored("job-2")).__pydantic_fields_set__
    assert second.resources is first.resources  # the parse shared: only the name is its own
    assert specs.load(stored("job-1")) is first  # the same text again: the same object
    other = specs.load(stored("job-3", env={"A": "1"}))  # another value: its own parse
    assert other == load_stored(stored("job-3", env={"A": "1"})) and other.resources is not first.resources


def test_a_text_not_in_the_stored_form_is_parsed_as_it_is():
    specs = Specs()
    spaced = json.dumps(json.loads(stored("job-1")))  # ", " and ": ": not the stored form
    assert specs.load(spaced) == load_stored(spaced)
    specs.load(stored("job-1"))
    renamed = stored("job-1").replace('"name":"job-1"', '"name":"Job 2"')  # not a name the validator takes
    with pytest.raises(ValueError, match="name"):
        specs.load(renamed)


def test_an_unreadable_text_raises_as_load_stored_does_and_the_cache_is_bounded():
    specs = Specs(most=2)
    bad = stored("job-1").replace('"run":"python train.py"', '"run":""')
    with pytest.raises(ValueError):
        specs.load(bad)
    for k in range(5):
        assert specs.load(stored(f"job-{k}", env={"K": str(k)})).env == {"K": str(k)}
    assert len(specs._by_rest) <= 2

"""The sim's capacity knob (``<home>/capacity.json``) is read again whenever it changes, though a
launch only ``stat``s it while it does not (``SimProvider._unavailable``)."""

from __future__ import annotations

import os

import pytest
from sim_data import TRACES

from gpuorch.errors import NoCapacityError
from gpuorch.provider.port import LaunchRequest


def test_a_market_made_unavailable_and_available_again_is_seen_at_each_launch(make_sim):
    sim = make_sim(traces=str(TRACES))
    offer = sim.offers()[0]
    assert sim.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False)).state.alive
    for attempt in (2, 3):  # set twice within a second: the same size, each read again
        sim.set_capacity(offer.zone, offer.instance_type, False, available=False)
        with pytest.raises(NoCapacityError, match="on-demand capacity"):
            sim.launch(LaunchRequest(job_id=1, attempt=attempt, offer=offer, spot=False))
        sim.set_capacity(offer.zone, offer.instance_type, False, available=True)
        assert sim.launch(LaunchRequest(job_id=1, attempt=attempt + 10, offer=offer, spot=False)).state.alive


def test_an_old_unchanged_file_is_parsed_once(make_sim, monkeypatch):
    from gpuorch.provider.localdir import capacity

    sim = make_sim(traces=str(TRACES))
    offer = sim.offers()[0]
    sim.set_capacity("elsewhere-1a", "x", False, available=False)
    path = sim.home / capacity.CAPACITY_FILE
    os.utime(path, (path.stat().st_atime - 60, path.stat().st_mtime - 60))  # written a minute ago
    reads: list[int] = []
    read = capacity.read_unavailable
    monkeypatch.setattr(capacity, "read_unavailable", lambda home: reads.append(1) or read(home))
    for attempt in range(1, 4):
        sim.launch(LaunchRequest(job_id=1, attempt=attempt, offer=offer, spot=False))
    assert reads == [1]
    sim.set_capacity(offer.zone, offer.instance_type, False, available=False)  # a new file: read again
    with pytest.raises(NoCapacityError):
        sim.launch(LaunchRequest(job_id=1, attempt=9, offer=offer, spot=False))


def test_a_launch_made_before_is_the_answer_to_its_repeat_whatever_the_market_says_now(make_sim):
    sim = make_sim(traces=str(TRACES), boot_s=0)
    offer = sim.offers()[0]
    request = LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False, owner="me")
    first = sim.launch(request)
    assert sim.launch(request).id == first.id  # the id taken: its record is the answer, no second instance
    sim.set_capacity(offer.zone, offer.instance_type, False, available=False)
    again = sim.launch(request)  # no capacity now: the instance it made before, not a refusal
    assert (again.id, again.state) == (first.id, first.state)
    assert len([i for i in sim.list_managed() if i.id == first.id]) == 1
    with pytest.raises(NoCapacityError):  # a launch never made is refused
        sim.launch(LaunchRequest(job_id=1, attempt=2, offer=offer, spot=False, owner="me"))
    assert not [p for p in sim.instances_dir.iterdir() if p.name.startswith(".staging-")]

"""The sim's ``catalog`` option: a file of offers the sim sells besides its zones' own (what
bench/queue_drain.py runs a daemon on), on demand and spot, always with capacity."""

from __future__ import annotations

import json

import pytest
from sim_data import TRACES

from gpuorch.errors import UserInputError
from gpuorch.provider.port import InstanceState, LaunchRequest, Offer


def _offer(zone: str, itype: str, price: float) -> Offer:
    return Offer(provider="aws", region=zone[:-1], zone=zone, instance_type=itype, gpu="A100", gpu_count=8,
                 gpu_memory_gib=80, vcpus=96, memory_gib=1152, price_per_hour=price, spot_price_per_hour=price / 3)


def test_a_catalog_file_is_sold_besides_the_zones_offers(make_sim, tmp_path):
    rows = [_offer("eu-west-9a", "p4de.24xlarge", 40.0), _offer("eu-west-9b", "p4de.24xlarge", 41.0)]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps([o.model_dump(mode="json") for o in rows]))
    sim = make_sim(traces=str(TRACES), boot_s=0, agents="external", catalog=str(path))
    offers = sim.offers()
    listed = [o for o in offers if o.instance_type == "p4de.24xlarge"]
    assert [(o.provider, o.zone, o.price_per_hour) for o in listed] == [("sim", "eu-west-9a", 40.0),
                                                                          ("sim", "eu-west-9b", 41.0)]
    assert len(offers) == len(listed) + len(make_sim("plain", traces=str(TRACES)).offers())
    for spot in (False, True):
        inst = sim.launch(LaunchRequest(job_id=1, attempt=1 + spot, offer=listed[1], spot=spot, owner="me"))
        assert inst.zone == "eu-west-9b" and inst.spot == spot
        assert sim.get(inst.id).state in (InstanceState.PENDING, InstanceState.RUNNING)


@pytest.mark.parametrize("text", ["not json", '{"a": 1}', '[{"zone": "x"}]'])
def test_a_bad_catalog_file_names_the_option(make_sim, tmp_path, text):
    path = tmp_path / "catalog.json"
    path.write_text(text)
    with pytest.raises(UserInputError, match=r"^providers\.sim\.catalog: "):
        make_sim(traces=str(TRACES), catalog=str(path))
    with pytest.raises(UserInputError, match=r"^providers\.sim\.catalog: "):
        make_sim("missing", traces=str(TRACES), catalog=str(tmp_path / "nope.json"))

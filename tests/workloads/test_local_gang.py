"""The local provider's gangs (``gpuorch_local.gang``) without a training job: one instance to
the daemon, every node launched or none, one fate for all nodes."""

from __future__ import annotations

import pytest

from gpuorch.errors import NoCapacityError
from gpuorch.provider.gang import node_token
from gpuorch.provider.localdir import InstanceDir, instance_id_for
from gpuorch.provider.port import InstanceState, LaunchRequest
from gpuorch_local.gang import GangRunner
from gpuorch_local.provider import LocalProvider


def request(local: LocalProvider, nodes: int = 3, attempt: int = 1) -> LaunchRequest:
    offer = next(o for o in local.offers() if o.spot_price_per_hour is not None)
    return LaunchRequest(job_id=4, attempt=attempt, offer=offer, spot=True, nodes=nodes, owner="o1")


def nodes_of(local: LocalProvider, req: LaunchRequest) -> list[InstanceDir]:
    return [InstanceDir(local.instances_dir / instance_id_for(node_token(req.client_token, k)))
            for k in range(req.nodes)]


def test_a_gang_is_one_instance_and_launching_it_again_adds_nothing(tmp_path):
    local = LocalProvider(tmp_path)
    req = request(local)
    inst = local.launch(req)
    assert local.launch(req).id == inst.id  # idempotent: the same gang
    assert [i.id for i in local.list_managed()] == [inst.id]  # one instance per attempt
    assert [d.read().tags["gpuorch:node"] for d in nodes_of(local, req)] == ["0-of-3", "1-of-3", "2-of-3"]
    assert isinstance(local.runner(inst), GangRunner)


def test_no_capacity_launches_no_node(tmp_path):
    local = LocalProvider(tmp_path)
    req = request(local)
    local.set_capacity(req.offer.zone, req.offer.instance_type, True, False)
    with pytest.raises(NoCapacityError):
        local.launch(req)
    assert local.list_managed() == [] and not any(d.meta_file.exists() for d in nodes_of(local, req))


def test_a_node_that_ends_ends_its_gang(tmp_path):
    local = LocalProvider(tmp_path)
    req = request(local)
    inst = local.launch(req)
    node2 = nodes_of(local, req)[2]
    node2.end(InstanceState.PREEMPTED, "spot-interruption")  # the cloud took one machine
    assert local.get(inst.id).state == InstanceState.PREEMPTED
    assert [d.read().state for d in nodes_of(local, req)] == [InstanceState.PREEMPTED] * 3


def test_a_notice_on_one_node_is_a_notice_to_every_node(tmp_path):
    local = LocalProvider(tmp_path)
    req = request(local)
    inst = local.launch(req)
    local.inject_preemption(nodes_of(local, req)[1].id, notice_s=60)
    deadline = local.get(inst.id).preemption_deadline
    assert deadline is not None
    assert all(d.read().preemption_deadline == deadline and d.notice_file.exists() for d in nodes_of(local, req))
    local.terminate(inst.id)


def test_terminating_the_gang_terminates_every_node(tmp_path):
    local = LocalProvider(tmp_path)
    req = request(local)
    inst = local.launch(req)
    local.terminate(inst.id)
    assert not any(d.read().state.alive for d in nodes_of(local, req))
    assert [i for i in local.list_managed() if i.state.alive] == []


def test_a_node_without_its_node_0_is_ended(tmp_path):
    import shutil

    local = LocalProvider(tmp_path)
    req = request(local, nodes=2)
    local.launch(req)
    node0, node1 = nodes_of(local, req)
    shutil.rmtree(node0.path)  # only by hand: node 0 is created first and never removed
    assert local.list_managed() == []
    assert not node1.read().state.alive  # nothing of the gang bills on

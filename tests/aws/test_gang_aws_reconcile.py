"""A ``nodes: 2`` job through the real reconciler on the AWS adapter (moto, SQLite, a scripted
agent per gang as in ``reconcile_helpers``): launched as one gang in one cluster placement
group, a spot interruption of node 1 ends the attempt and the job relaunches as a gang in a new
group, the first group is deleted, and when the job finishes no node and no group is left."""

from __future__ import annotations

import pytest
from moto_helpers import interrupt_spot
from moto_placement import PlacementGroups
from reconcile_helpers import Installation, passes

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import TAG_NODE
from gpuorch.store.models import JobStatus

pytestmark = pytest.mark.aws


def live_nodes(inst: Installation, job_id: int) -> list[tuple[str, str, str]]:
    ec2 = inst.provider.client("us-east-1")
    res = ec2.describe_instances(Filters=[{"Name": "tag:gpuorch:job", "Values": [str(job_id)]},
                                          {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    return sorted((t["gpuorch:attempt"], t[TAG_NODE], i["InstanceId"]) for r in res["Reservations"]
                  for i in r["Instances"] for t in [{x["Key"]: x["Value"] for x in i.get("Tags", [])}])


def test_a_gang_job_relaunches_as_a_gang_and_leaves_no_node_and_no_group(
    moto, session, tmp_path, clock, placement_groups: PlacementGroups
) -> None:
    a = Installation(tmp_path / "a.db", session, clock)
    spec = parse_spec({"name": "ddp", "run": "torchrun train.py", "nodes": 2, "spot_policy": "spot",
                       "resources": {"gpu": "A100:8"}, "retry": {"max_preemptions": 3}})
    job = jobs.submit(a.store, spec, clock.now())
    assert job.id is not None
    passes(clock, a)
    assert a.job(job.id).status == JobStatus.RUNNING
    first = live_nodes(a, job.id)
    assert [(att, node) for att, node, _ in first] == [("1", "0-of-2"), ("1", "1-of-2")]
    [gang] = [i for i in a.provider.list_managed() if i.state.alive]
    assert gang.id == first[0][2] and a.agents[gang.id].started is not None
    groups = placement_groups.names()
    assert len(groups) == 1 and groups[0].endswith(f"-{job.id}-1")

    interrupt_spot("us-east-1", first[1][2])  # EC2 reclaims node 1
    passes(clock, a, n=6)
    second = live_nodes(a, job.id)
    assert [(att, node) for att, node, _ in second] == [("2", "0-of-2"), ("2", "1-of-2")]
    assert [g[-2:] for g in placement_groups.names()] == ["-2"], "attempt 1's group is deleted"
    a.agents[second[0][2]].done = True
    passes(clock, a, n=6)
    assert a.job(job.id).status == JobStatus.SUCCEEDED
    assert live_nodes(a, job.id) == [] and placement_groups.names() == []

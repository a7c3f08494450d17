"""moto glue for the AWS tests: the ONE place that reaches into moto's backend (moto 5.2.x).

moto has no capacity errors, no spot interruptions, no scheduled events and no Deep Learning
AMI; these helpers supply them. Errors are injected the way AWS would send them, through a
botocore ``before-call`` hook on the provider's real client (no mock.patch of boto3).
Private moto attributes used here: ``ec2_backends``, ``Ami``, ``Instance.events``,
``Instance.state_reason``/``_reason``, ``all_instances``, ``Instance.spot_instance_request_id``,
``SpotInstanceRequest._status_code``. Pin moto when changing any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

ACCOUNT = "123456789012"  # moto's default account
DLAMI_ID = "ami-0d1a0000000000001"
DLAMI_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250101"
SPOT_TERMINATION = "Server.SpotInstanceTermination"


def backend(region: str) -> Any:
    from moto.ec2 import ec2_backends

    return ec2_backends[ACCOUNT][region]


def add_dlami(region: str, ami_id: str = DLAMI_ID, name: str = DLAMI_NAME) -> str:
    """An Amazon-owned image named like the Deep Learning AMI, with a fixed id, in ``region``."""
    from moto.ec2.models.amis import Ami

    b = backend(region)
    b.amis[ami_id] = Ami(b, ami_id, name=name, owner_alias="amazon", owner_id="898082745236", public=True,
                         architecture="x86_64", virtualization_type="hvm", root_device_type="ebs",
                         root_device_name="/dev/sda1", region_name=region)
    return ami_id


def announce_reclaim(region: str, instance_id: str, not_before: datetime, code: str = "instance-stop",
                     description: str = "The instance is scheduled for stop") -> None:
    """A scheduled event on the instance, as ``DescribeInstanceStatus`` shows it."""
    backend(region).get_instance(instance_id).events = [
        {"Code": code, "Description": description, "NotBefore": not_before}
    ]


def interrupt_spot(region: str, instance_id: str) -> None:
    """Reclaim the instance the way EC2 reclaims a spot instance: terminated, with that reason."""
    from moto.ec2.models.instances import StateReason

    inst = backend(region).get_instance(instance_id)
    inst.terminate()
    inst.events = []
    inst.state_reason = StateReason(f"{SPOT_TERMINATION}: Spot instance termination", SPOT_TERMINATION)
    inst._reason = f"{SPOT_TERMINATION}: Spot instance termination"


def instance_states(region: str) -> dict[str, tuple[str, str]]:
    """instance id -> (state name, zone) of every instance moto holds in ``region``; an in-memory
    read, much cheaper than DescribeInstances for a harness that looks before every pass."""
    return {i.id: (i.state, i.availability_zone or "") for i in backend(region).all_instances()}


def mark_spot_request(client: Any, region: str, instance_id: str, code: str = "marked-for-termination") -> str:
    """Give the instance a spot request whose status is ``code`` (moto's UpdateTime is fixed at
    2015-01-01T00:00:00Z). Returns the request id."""
    sir = client.request_spot_instances(LaunchSpecification={"ImageId": DLAMI_ID, "InstanceType": "t3.micro"})
    sir_id = sir["SpotInstanceRequests"][0]["SpotInstanceRequestId"]
    b = backend(region)
    b.spot_instance_requests[sir_id]._status_code = code
    b.get_instance(instance_id).spot_instance_request_id = sir_id
    return sir_id


_ACTIVE: list[Refusals] = []


def remove_refusals() -> None:
    """Unhook every ``Refusals`` (the tests share clients; conftest calls this after each test)."""
    while _ACTIVE:
        _ACTIVE.pop().remove()


class Refusals:
    """Make calls of one operation fail with an AWS error code, as EC2 would answer them.

    ``times``: how many calls fail (None: all); ``when(params)`` narrows which calls fail.
    ``raise_`` replaces the error response with an exception (connection errors, timeouts);
    ``answer`` with a successful response (a parsed body, as boto3 would return it).
    """

    def __init__(self, client: Any, operation: str, code: str = "", status: int = 400, *, times: int | None = None,
                 when: Callable[[dict[str, Any]], bool] | None = None, raise_: Callable[[], Exception] | None = None,
                 answer: dict[str, Any] | None = None) -> None:
        self.client, self.event = client, f"before-call.ec2.{operation}"
        self.code, self.status, self.times, self.when, self.raise_ = code, status, times, when, raise_
        self.answer = answer
        self.calls = 0  # calls seen, failed or not
        self.failed = 0
        self.unique_id = f"refuse-{operation}-{id(self)}"
        client.meta.events.register(self.event, self._hook, unique_id=self.unique_id)
        _ACTIVE.append(self)

    def _hook(self, params: dict[str, Any], **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        self.calls += 1
        spent = self.times is not None and self.failed >= self.times
        if spent or (self.when and not self.when(params.get("body") or {})):
            return None  # let the call through to moto
        self.failed += 1
        if self.raise_ is not None:
            raise self.raise_()
        if self.answer is not None:
            return AWSResponse("https://ec2.amazonaws.com/", 200, {}, None), self.answer
        body = {"Error": {"Code": self.code, "Message": f"injected {self.code}"},
                "ResponseMetadata": {"HTTPStatusCode": self.status}}
        return AWSResponse("https://ec2.amazonaws.com/", self.status, {}, None), body

    def remove(self) -> None:
        self.client.meta.events.unregister(self.event, unique_id=self.unique_id)


REGIONS = ["us-east-1", "us-west-2"]
# On-demand USD/hour (rounded list prices); moto has no pricing.
PRICES = {
    "us-east-1": {"g5.xlarge": 1.006, "g6.xlarge": 0.805, "p4d.24xlarge": 21.96, "p4de.24xlarge": 27.45,
                  "p5.48xlarge": 55.04, "t3.micro": 0.0104},
    "us-west-2": {"g5.xlarge": 1.006, "p5.48xlarge": 55.04},
}


def static_prices(region: str) -> dict[str, float]:
    return PRICES.get(region, {})

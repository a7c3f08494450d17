"""EC2 placement groups for the AWS tests: moto 5.2.5 (the newest on PyPI, `pip index versions
moto`) does not implement CreatePlacementGroup, DescribePlacementGroups or DeletePlacementGroup
(NotImplementedError), and ignores ``Placement.GroupName`` in RunInstances.

``PlacementGroups`` stands in for those three calls with botocore ``before-call`` hooks on the
provider's real client (as ``moto_helpers.Refusals`` injects errors): the request goes through
boto3's serializer and parameter validation, and the answer through its parser, as EC2's would.
It keeps what EC2 keeps and refuses what EC2 refuses, as far as gpuorch relies on it:

- Create: a name unique per region (``InvalidPlacementGroup.Duplicate``), the tags given.
- Describe: by ``GroupNames`` (``InvalidPlacementGroup.Unknown`` for a missing one) or by
  ``tag:`` filters.
- Delete: ``InvalidPlacementGroup.InUse`` while an instance launched into it (per RunInstances,
  recorded here) is not terminated in moto; ``InvalidPlacementGroup.Unknown`` if missing.
- RunInstances into a group: ``InvalidPlacementGroup.Unknown`` for a missing group, and a
  ``cluster`` group keeps to the zone of its first instance (``InvalidParameterCombination``).
"""

from __future__ import annotations

import itertools
from typing import Any

from moto_helpers import instance_states

_IDS = itertools.count(1)


def _flat_tags(body: dict[str, Any], prefix: str) -> dict[str, str]:
    tags, k = {}, 1
    while f"{prefix}.Tag.{k}.Key" in body:
        tags[body[f"{prefix}.Tag.{k}.Key"]] = body.get(f"{prefix}.Tag.{k}.Value", "")
        k += 1
    return tags


def _filters(body: dict[str, Any]) -> dict[str, list[str]]:
    out, k = {}, 1
    while f"Filter.{k}.Name" in body:
        values, j = [], 1
        while f"Filter.{k}.Value.{j}" in body:
            values.append(body[f"Filter.{k}.Value.{j}"])
            j += 1
        out[body[f"Filter.{k}.Name"]] = values
        k += 1
    return out


class PlacementGroups:
    """The placement groups of every region, answered on each client ``attach``-ed (one per
    region; conftest attaches every client it makes and ``reset``s the state with moto's)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}  # (region, name) -> group
        self.members: dict[tuple[str, str], list[str]] = {}  # (region, name) -> instance ids launched into it
        self.zones: dict[tuple[str, str], str] = {}
        self.created: list[str] = []  # names, in order of creation (duplicates refused are not)
        self.deleted: list[str] = []
        self._pending: dict[str, tuple[str, str] | None] = {}

    def attach(self, region: str, client: Any) -> None:
        for op, fn in (("CreatePlacementGroup", self._create), ("DescribePlacementGroups", self._describe),
                       ("DeletePlacementGroup", self._delete), ("RunInstances", self._run)):
            self._on(client, f"before-call.ec2.{op}", region, fn)
        self._on(client, "after-call.ec2.RunInstances", region, self._ran)

    @staticmethod
    def _on(client: Any, event: str, region: str, fn: Any) -> None:
        # last: a test's Refusals on the same call answer first
        client.meta.events.register_last(event, lambda **kw: fn(region, **kw), unique_id=f"pg-{event}")

    # -- answers -------------------------------------------------------------------------------
    @staticmethod
    def _ok(parsed: dict[str, Any]) -> Any:
        from botocore.awsrequest import AWSResponse

        return AWSResponse("https://ec2.amazonaws.com/", 200, {}, None), {**parsed, "ResponseMetadata": {
            "HTTPStatusCode": 200}}

    @staticmethod
    def _error(code: str, message: str) -> Any:
        from botocore.awsrequest import AWSResponse

        return AWSResponse("https://ec2.amazonaws.com/", 400, {}, None), {
            "Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}

    def _create(self, region: str, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}
        key = (region, body["GroupName"])
        if key in self.groups:
            return self._error("InvalidPlacementGroup.Duplicate", f"Placement group {key[1]} already exists")
        tags = _flat_tags(body, "TagSpecification.1") if body.get("TagSpecification.1.ResourceType") == \
            "placement-group" else {}
        group = {"GroupName": key[1], "GroupId": f"pg-{next(_IDS):017x}", "State": "available",
                 "Strategy": body.get("Strategy", "cluster"), "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        self.groups[key] = group
        self.created.append(key[1])
        return self._ok({"PlacementGroup": group})

    def _describe(self, region: str, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}
        names = [v for k, v in sorted(body.items()) if k.startswith("GroupName.")]
        mine = {name: g for (r, name), g in self.groups.items() if r == region}
        if names:
            missing = [n for n in names if n not in mine]
            if missing:
                return self._error("InvalidPlacementGroup.Unknown", f"The placement group '{missing[0]}' is unknown.")
            found = [mine[n] for n in names]
        else:
            found = list(mine.values())
        for name, values in _filters(body).items():
            if name.startswith("tag:"):
                found = [g for g in found if any(t["Key"] == name[4:] and t["Value"] in values for t in g["Tags"])]
        return self._ok({"PlacementGroups": found})

    def _delete(self, region: str, params: dict[str, Any], **_: Any) -> Any:
        name = (params.get("body") or {})["GroupName"]
        key = (region, name)
        if key not in self.groups:
            return self._error("InvalidPlacementGroup.Unknown", f"The placement group '{name}' is unknown.")
        states = instance_states(region)
        held = [i for i in self.members.get(key, []) if states.get(i, ("terminated", ""))[0] != "terminated"]
        if held:
            return self._error("InvalidPlacementGroup.InUse", f"There are instances in placement group {name}")
        del self.groups[key]
        self.deleted.append(name)
        return self._ok({})

    def _run(self, region: str, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}
        name = body.get("Placement.GroupName")
        self._pending[region] = None
        if not name:
            return None
        key = (region, name)
        if key not in self.groups:
            return self._error("InvalidPlacementGroup.Unknown", f"The placement group '{name}' is unknown.")
        zone = body.get("Placement.AvailabilityZone", "")
        if self.zones.setdefault(key, zone) != zone:
            return self._error("InvalidParameterCombination",
                               f"cluster placement group {name} is in {self.zones[key]}, not {zone}")
        self._pending[region] = key
        return None  # moto launches the instance

    def _ran(self, region: str, parsed: dict[str, Any], **_: Any) -> None:
        key = self._pending.pop(region, None)
        if key is not None:
            self.members.setdefault(key, []).extend(i["InstanceId"] for i in parsed.get("Instances", []))

    def names(self, region: str | None = None) -> list[str]:
        return sorted(name for (r, name) in self.groups if region is None or r == region)

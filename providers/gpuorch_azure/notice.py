"""The Azure spot eviction notice from Scheduled Events (kind ``azure`` in the
``gpuorch.notices`` registry).

Instance-side: shipped in the agent bundle; stdlib and ``gpuorch.agent`` only (Python 3.8+).
"""

from __future__ import annotations

import json

from gpuorch.agent.notice import MetadataNotice, preempt_deadline


class AzureNotice(MetadataNotice):
    """Azure spot eviction notice from Scheduled Events (instance metadata, about 30 s ahead).

    ``GET /metadata/scheduledevents?api-version=2020-07-01`` with ``Metadata: true`` returns
    ``{"DocumentIncarnation": n, "Events": [{"EventId", "EventType", "EventStatus", "Resources",
    "NotBefore", ...}]}``. An event of type ``Preempt`` is the eviction; its ``NotBefore`` (an
    RFC 1123 date, like ``Mon, 19 Sep 2016 18:29:47 GMT``) is the deadline, and an empty one
    (a started event) means now. Other events (Reboot, Redeploy, Freeze, Terminate) are not
    evictions. The service is reached only from inside the VM; a standalone VM sees only its own
    events (``Resources`` names other VMs only in availability or scale sets, which gpuorch does
    not use).
    """

    DEFAULT_URL = "http://169.254.169.254"
    PATH = "/metadata/scheduledevents?api-version=2020-07-01"
    HEADERS = {"Metadata": "true"}
    WHAT = "Azure Scheduled Events"

    def _deadline_in(self, body: bytes) -> float | None:
        return preempt_deadline(json.loads(body.decode()))

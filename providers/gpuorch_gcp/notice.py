"""The GCE preemption notice (kind ``gcp`` in the ``gpuorch.notices`` registry).

Instance-side: shipped in the agent bundle; stdlib and ``gpuorch.agent`` only (Python 3.8+).
"""

from __future__ import annotations

import time

from gpuorch.agent.notice import MetadataNotice


class GcpNotice(MetadataNotice):
    """GCE preemption notice from the metadata server (``instance/preempted``, about 30 s ahead).

    The server answers ``TRUE`` once GCE has begun reclaiming the VM (``FALSE`` before); the
    request must carry ``Metadata-Flavor: Google``. The notice carries no time: the deadline is
    when TRUE was first seen plus GCE's 30 s, remembered so later polls keep the same deadline.
    (``?wait_for_change=true`` would block; the agent's loop polls instead, every ``poll_s``.)
    """

    NOTICE_S = 30.0
    DEFAULT_URL = "http://metadata.google.internal"
    PATH = "/computeMetadata/v1/instance/preempted"
    HEADERS = {"Metadata-Flavor": "Google"}
    WHAT = "the GCP preemption notice"

    def _deadline_in(self, body: bytes) -> float | None:
        return time.time() + self.NOTICE_S if body.decode().strip().upper() == "TRUE" else None

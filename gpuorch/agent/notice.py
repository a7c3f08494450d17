"""Preemption notice sources: each is a tiny class whose ``poll()`` returns a deadline or None.

``poll()`` never raises and never blocks for long: a source that cannot be read right now
(metadata service hiccup, half-written file) answers None and is asked again next time.
"""

from __future__ import annotations

import calendar
import email.utils
import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Protocol

from gpuorch.agent.protocol import NoticeSource

log = logging.getLogger("gpuorch.agent")


class NoticePoller(Protocol):
    def poll(self) -> float | None:
        """The epoch deadline of an announced preemption, or None if none is announced."""


class NoNotice:
    def poll(self) -> float | None:
        return None


class FileNotice:
    """A JSON file ``{"deadline": <epoch>}`` appears at ``path`` (local runs, simulations).

    A file without a usable ``deadline`` means "now"; a half-written one is read again later.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def poll(self) -> float | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):  # absent, or still being written
            return None
        deadline = data.get("deadline") if isinstance(data, dict) else None
        if isinstance(deadline, (int, float)) and not isinstance(deadline, bool):
            return float(deadline)
        return time.time()


class AwsNotice:
    """EC2 spot interruption notice via IMDSv2 (``spot/instance-action``, about 2 minutes ahead).

    A session token (PUT ``/latest/api/token``) is fetched once and renewed before it expires
    or when the service rejects it (401). 404 on ``instance-action`` means no notice.
    """

    TOKEN_TTL_S = 21600

    def __init__(self, url: str | None = None, timeout_s: float = 1.0) -> None:
        self.base = (url or "http://169.254.169.254").rstrip("/")
        self.timeout_s = timeout_s
        self._token: str | None = None
        self._token_expires = 0.0
        self._warned = False

    def poll(self) -> float | None:
        try:
            return self._instance_action()
        except (OSError, ValueError, KeyError) as e:  # URLError/HTTPError are OSErrors
            if not self._warned:  # the metadata service being down is not worth a log line a second
                log.warning("cannot read the AWS spot notice from %s: %s", self.base, e)
                self._warned = True
            return None

    def _token_header(self) -> dict[str, str]:
        if self._token is None or time.time() > self._token_expires:
            req = urllib.request.Request(
                self.base + "/latest/api/token",
                method="PUT",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": str(self.TOKEN_TTL_S)},
            )
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                self._token = resp.read().decode().strip()
            self._token_expires = time.time() + self.TOKEN_TTL_S - 60
        return {"X-aws-ec2-metadata-token": self._token}

    def _instance_action(self) -> float | None:
        req = urllib.request.Request(self.base + "/latest/meta-data/spot/instance-action", headers=self._token_header())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = json.loads(resp.read().decode())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            if e.code == 401:
                self._token = None  # expired or revoked: get a new one next poll
            raise
        return parse_aws_time(str(body["time"]))


class _MetadataNotice:
    """A notice read from the cloud's instance metadata service: one GET per poll; the first
    deadline found is kept (the instance is going regardless). An unreachable service is warned
    about once and reads as "no notice"."""

    DEFAULT_URL = ""
    PATH = ""
    HEADERS: dict = {}
    WHAT = ""  # for the warning

    def __init__(self, url: str | None = None, timeout_s: float = 1.0) -> None:
        self.base = (url or self.DEFAULT_URL).rstrip("/")
        self.timeout_s = timeout_s
        self._deadline: float | None = None
        self._warned = False

    def _deadline_in(self, body: bytes) -> float | None:
        raise NotImplementedError

    def poll(self) -> float | None:
        if self._deadline is not None:
            return self._deadline
        req = urllib.request.Request(self.base + self.PATH, headers=self.HEADERS)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                self._deadline = self._deadline_in(resp.read())
        except (OSError, ValueError, TypeError, AttributeError) as e:  # URLError/HTTPError are OSErrors
            if not self._warned:
                log.warning("cannot read %s from %s: %s", self.WHAT, self.base, e)
                self._warned = True
            return None
        return self._deadline


class GcpNotice(_MetadataNotice):
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


class AzureNotice(_MetadataNotice):
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


def preempt_deadline(doc: dict, now: float | None = None) -> float | None:
    """The earliest ``Preempt`` event's ``NotBefore`` in a Scheduled Events document (epoch
    seconds; ``now`` for an event without one), or None when no eviction is announced."""
    deadlines = []
    for event in doc.get("Events") or ():
        if str(event.get("EventType", "")).lower() != "preempt":
            continue
        not_before = str(event.get("NotBefore") or "").strip()
        if not_before:
            deadlines.append(email.utils.parsedate_to_datetime(not_before).timestamp())
        else:
            deadlines.append(time.time() if now is None else now)
    return min(deadlines, default=None)


def parse_aws_time(text: str) -> float:
    """``2017-09-18T08:22:00Z`` -> epoch seconds (UTC)."""
    return float(calendar.timegm(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%SZ")))


# kind -> factory(source, rundir).
SOURCES: dict[str, Callable[[NoticeSource, Path], NoticePoller]] = {
    "none": lambda s, rundir: NoNotice(),
    "file": lambda s, rundir: FileNotice(rundir / (s.path or "notice.json")),
    "aws": lambda s, rundir: AwsNotice(s.url),
    "gcp": lambda s, rundir: GcpNotice(s.url),
    "azure": lambda s, rundir: AzureNotice(s.url),
}


def make_notice_source(source: NoticeSource, rundir: Path) -> NoticePoller:
    """The poller for ``source``; a relative file path is relative to the run dir."""
    factory = SOURCES.get(source.kind)
    if factory is None:
        raise ValueError(f"notice.kind {source.kind!r} is not supported; use one of {', '.join(SOURCES)}")
    return factory(source, rundir)

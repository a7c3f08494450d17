"""The EC2 spot interruption notice (kind ``aws`` in the ``gpuorch.notices`` registry).

Instance-side: shipped in the agent bundle; stdlib and ``gpuorch.agent`` only (Python 3.8+).
"""

from __future__ import annotations

import calendar
import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from gpuorch.agent.notice import log
from gpuorch.agent.protocol import NoticeSource


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

    @classmethod
    def from_source(cls, source: NoticeSource, rundir: Path) -> AwsNotice:
        return cls(source.url)

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


def parse_aws_time(text: str) -> float:
    """``2017-09-18T08:22:00Z`` -> epoch seconds (UTC)."""
    return float(calendar.timegm(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%SZ")))

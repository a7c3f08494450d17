"""The machines behind the fake Lambda API's instances (tests/lambdalabs/fake_lambda.py), for the
warm-instance tests on an SSH runner: each instance launched gets a real sshd on 127.0.0.1 with the
host key and the login key its launch's cloud-config hands over, as its cloud-init would
(shared/TESTING.md, "SSH"); the provider's ``runner_options`` point its SSH runner there.

The instance's ``shutdown_command`` is ``poweroff.py``: what a powered-off VM becomes at the cloud
(the instance ends: a terminate through the fake's API), plus a marker file a test can see.

Its preemption notice is a ``file`` notice source (``announce``), standing in for a spot cloud's
metadata notice that only the instance hears: Lambda's listing carries none, as a metadata notice
never reaches a listing (the AWS, GCP and Azure pollers read the same way: ``gpuorch.agent.notice``)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdalabs"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))

from fake_lambda import KEY, FakeLambda
from sshd import Sshd, free_port

from gpuorch.agent.protocol import NoticeSource, write_atomic
from gpuorch.provider.port import Instance

POWEROFF = """\
import json, pathlib, sys, urllib.request
url, instance_id, marker = sys.argv[1:4]
pathlib.Path(marker).write_text(instance_id)
body = json.dumps({"instance_ids": [instance_id]}).encode()
req = urllib.request.Request(url + "/instance-operations/terminate", data=body, method="POST",
                             headers={"Authorization": "Bearer KEY", "Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=10).read()
print("powered off", instance_id)
""".replace("KEY", KEY)


class Machines:
    """``options`` is the Lambda provider's ``runner_options``; ``boot()`` plays cloud-init."""

    def __init__(self, fake: FakeLambda, root: Path) -> None:
        self.fake, self.root = fake, root
        self.sshd: dict[str, Sshd] = {}
        self.closed_port = free_port()  # nothing listens there: "booting"
        root.mkdir(parents=True, exist_ok=True)
        self.poweroff = root / "poweroff.py"
        self.poweroff.write_text(POWEROFF)

    def marker(self, instance_id: str) -> Path:
        return self.root / f"{instance_id}.powered-off"

    def notice_file(self, instance_id: str) -> Path:
        return self.root / f"{instance_id}.notice.json"

    def announce(self, instance_id: str, in_s: float) -> float:
        """The cloud's notice, as the instance's metadata would say: reclaimed ``in_s`` from now."""
        deadline = time.time() + in_s
        write_atomic(self.notice_file(instance_id), json.dumps({"deadline": deadline}))
        return deadline

    def remote_root(self, instance_id: str) -> Path:
        return self.root / instance_id / "gpuorch"

    def boot(self) -> None:
        """Start the sshd of every live instance that has none yet."""
        for inst in self.fake.live():
            if inst.id in self.sshd or not inst.user_data:
                continue
            doc = yaml.safe_load(inst.user_data.removeprefix("#cloud-config\n"))
            self.sshd[inst.id] = Sshd(self.root / inst.id / "sshd", doc["ssh_keys"]["ed25519_private"],
                                      doc["ssh_authorized_keys"]).start()

    def options(self, instance: Instance) -> dict[str, Any]:
        fast = {"connect_attempts": 2, "retry_wait_s": 0.05, "retry_wait_max_s": 0.2, "connect_timeout": 5.0}
        sshd = self.sshd.get(instance.id)
        if sshd is None:
            return {"host": "127.0.0.1", "port": self.closed_port, **fast}
        command = shlex.join(str(a) for a in (sys.executable, self.poweroff, self.fake.url, instance.id,
                                              self.marker(instance.id)))
        return {"host": "127.0.0.1", "port": sshd.port, "remote_root": str(self.remote_root(instance.id)),
                "python": sys.executable, "shutdown_command": command,
                "notice": NoticeSource(kind="file", path=str(self.notice_file(instance.id)), poll_s=0.2), **fast}

    def processes(self) -> list[int]:
        """The instances' own processes: agents and idle watchers (an argument under ``root``)."""
        prefix, found = str(self.root).encode() + b"/", []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                    if any(a.startswith(prefix) for a in args[1:]) and b"sshd" not in args[0]:
                        found.append(int(entry))
        return found

    def close(self) -> None:
        for sshd in self.sshd.values():
            with contextlib.suppress(Exception):
                sshd.stop()
        for pid in self.processes():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

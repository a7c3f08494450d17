"""Stand-ins for what an EC2 instance does on its own, for the AWS end-to-end test.

moto creates instances that exist only as records. ``FakeInstances`` plays cloud-init and the
machine: for each running gpuorch instance moto reports, it starts a throwaway sshd on
127.0.0.1 (tests/ssh/sshd.py) with the host key and the authorized keys found in that
instance's user data, so the daemon's pinned key and login key must be the ones it launched
with. The provider reaches it through its ``runner_options`` hook (this module's ``options``).
When moto says an instance ended (the daemon terminated it, or an injected spot interruption),
the machine goes away: its agent and job processes are killed, then its sshd.

``FakeImds`` is the instance metadata service the agent's ``aws`` notice source polls (IMDSv2:
a PUT for a token, then ``spot/instance-action`` with it); one server, one path prefix per
instance, so a notice reaches only the instance it is for.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))  # the sshd harness

from moto_helpers import instance_states, interrupt_spot
from sshd import Sshd, free_port

from gpuorch.agent.protocol import NoticeSource
from gpuorch.provider.port import Instance


class FakeImds:
    """IMDSv2 on 127.0.0.1 for many instances: ``url(instance_id)`` is one instance's base URL."""

    def __init__(self) -> None:
        self.notices: dict[str, float] = {}  # instance id -> interruption time (epoch)
        self.tokens: set[str] = set()
        self.polls: dict[str, int] = {}  # instance id -> instance-action reads
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:
                if not self.path.endswith("/latest/api/token") or not self.headers.get(
                        "X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._reply(400)
                token = secrets.token_hex(16)
                imds.tokens.add(token)
                return self._reply(200, token)

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") not in imds.tokens:
                    return self._reply(401)
                instance_id, _, rest = self.path.lstrip("/").partition("/")
                if rest != "latest/meta-data/spot/instance-action":
                    return self._reply(404)
                imds.polls[instance_id] = imds.polls.get(instance_id, 0) + 1
                at = imds.notices.get(instance_id)
                if at is None:
                    return self._reply(404)
                when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                return self._reply(200, json.dumps({"action": "terminate", "time": when}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-imds", daemon=True)
        self.thread.start()

    def url(self, instance_id: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{instance_id}"

    def announce(self, instance_id: str, in_s: float) -> float:
        """The 2-minute warning (shortened): the instance is reclaimed ``in_s`` from now."""
        at = time.time() + in_s
        self.notices[instance_id] = at
        return at

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Machine:
    instance_id: str
    region: str
    zone: str
    dir: Path
    sshd: Sshd
    gone: bool = False


class FakeInstances:
    """The machines behind moto's instances; ``sync()`` before each reconciler pass."""

    def __init__(
        self, root: Path, ec2_client: Any, regions: list[str], imds: FakeImds, agent_env: dict[str, str]
    ) -> None:
        self.root, self.client, self.regions = root, ec2_client, regions
        self.imds, self.agent_env = imds, agent_env
        self.machines: dict[str, Machine] = {}
        self._closed_port = free_port()  # nothing listens there: "booting"

    # -- the provider's runner_options hook -----------------------------------------------------
    def options(self, instance: Instance) -> dict[str, Any]:
        m = self.machines.get(instance.id)
        fast = {"connect_attempts": 2, "retry_wait_s": 0.05, "retry_wait_max_s": 0.2, "connect_timeout": 10}
        if m is None or m.gone:
            return {"host": "127.0.0.1", "port": self._closed_port, **fast}
        return {
            "host": "127.0.0.1", "port": m.sshd.port, "remote_root": str(m.dir / "gpuorch"),
            "python": sys.executable,  # this venv: boto3 for the s3:// checkpoint store
            "agent_env": self.agent_env,  # the moto S3 endpoint; real instances use their profile
            "notice": NoticeSource(kind="aws", url=self.imds.url(instance.id), poll_s=0.2),
            **fast,
        }

    # -- the machines ----------------------------------------------------------------------
    def sync(self) -> None:
        """Boot a machine for each new running instance; tear down those of ended instances."""
        for region in self.regions:
            for iid, (state, zone) in instance_states(region).items():
                m = self.machines.get(iid)
                if state == "running" and m is None:
                    self._boot(region, iid, zone)
                elif state in ("shutting-down", "terminated", "stopping", "stopped") and m is not None and not m.gone:
                    self.power_off(m)

    def _boot(self, region: str, iid: str, zone: str) -> None:
        """cloud-init: install the host key and the authorized keys of the user data, start sshd."""
        value = self.client(region).describe_instance_attribute(InstanceId=iid, Attribute="userData")
        text = base64.b64decode(value["UserData"]["Value"]).decode()
        assert text.startswith("#cloud-config\n"), text[:40]
        doc = yaml.safe_load(text)
        workdir = self.root / iid
        sshd = Sshd(workdir / "sshd", doc["ssh_keys"]["ed25519_private"], doc["ssh_authorized_keys"]).start()
        self.machines[iid] = Machine(iid, region, zone, workdir, sshd)

    def interrupt(self, instance_id: str) -> None:
        """EC2 reclaims the spot instance: terminated with the spot reason, the machine gone."""
        m = self.machines[instance_id]
        interrupt_spot(m.region, instance_id)
        self.power_off(m)

    def power_off(self, m: Machine) -> None:
        """Kill every process of the machine: its agent and job (found by their working
        directory under the machine's dir), its sshd's sessions, then its sshd."""
        m.gone = True
        sshd_pid = m.sshd.proc.pid if m.sshd.proc is not None else None
        for _ in range(3):  # again, in case one forked meanwhile
            for pid in _pids_of(m.dir, sshd_pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        m.sshd.stop()

    def close(self) -> None:
        for m in self.machines.values():
            if not m.gone:
                self.power_off(m)


def _pids_of(root: Path, sshd_pid: int | None) -> list[int]:
    """Processes whose working directory is under ``root``, and the sessions of ``sshd_pid``."""
    found = []
    prefix = str(root.resolve())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if cwd == prefix or cwd.startswith(prefix + "/") or (sshd_pid is not None and ppid == sshd_pid):
            found.append(pid)
    return found

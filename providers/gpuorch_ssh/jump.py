"""``JumpConnection``: the SSH runner's connection to a host reached through a jump host
(``proxy_jump``, OpenSSH's ``-J``): a ``direct-tcpip`` channel opened on a verified connection to
the jump host carries the connection to the host. Both host keys are checked against the pool's
pinned known_hosts; neither is ever accepted from the connection."""

from __future__ import annotations

import paramiko

from gpuorch.runners.connection import SshConnection
from gpuorch.runners.hostkeys import HostKeyRejected, fingerprint

from .config import Address


class JumpConnection(SshConnection):
    """An ``SshConnection`` whose every connect goes through ``jump`` (same login key)."""

    def __init__(self, *args: object, jump: Address, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.jump = jump
        self._jump_client: paramiko.SSHClient | None = None

    def __repr__(self) -> str:
        return f"{super().__repr__()} via {self.jump}"

    def close(self) -> None:
        super().close()
        if self._jump_client is not None:
            self._jump_client.close()
            self._jump_client = None

    def _connect_once(self, pkey: paramiko.PKey) -> paramiko.SSHClient:
        if self._jump_client is not None:
            self._jump_client.close()
        jump = self._verified_client()
        try:
            self._connect_client(jump, self.jump.host, self.jump.port, self.jump.user, pkey, None)
            transport = jump.get_transport()
            assert transport is not None
            channel = transport.open_channel("direct-tcpip", (self.host, self.port), ("127.0.0.1", 0),
                                             timeout=self.connect_timeout)
        except BaseException:
            jump.close()
            raise
        self._jump_client = jump
        client = self._verified_client()
        try:
            self._connect_client(client, self.host, self.port, self.user, pkey, channel)
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)
        return client

    def _verified_client(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if self.known_hosts_path.exists():
            client.get_host_keys().load(str(self.known_hosts_path))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return client

    def _connect_client(self, client: paramiko.SSHClient, host: str, port: int, user: str, pkey: paramiko.PKey,
                        sock: paramiko.Channel | None) -> None:
        where = f"{user}@{host}:{port}"
        try:
            client.connect(host, port, username=user, pkey=pkey, sock=sock, timeout=self.connect_timeout,
                           banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout,
                           allow_agent=False, look_for_keys=False)
        except paramiko.BadHostKeyException as e:
            raise HostKeyRejected(
                f"{where} (via {self.jump}): host key changed: {self.known_hosts_path} pins {_fp(e.expected_key)} "
                f"but the host offered {_fp(e.key)}; refusing to connect") from None
        except paramiko.SSHException as e:
            if "not found in known_hosts" in str(e):
                raise HostKeyRejected(f"{where} (via {self.jump}): no host key pinned for it in "
                                      f"{self.known_hosts_path}; refusing to connect") from None
            raise


def _fp(key: paramiko.PKey) -> str:
    return fingerprint(f"{key.get_name()} {key.get_base64()}")

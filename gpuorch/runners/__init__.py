"""Runner implementations for remote instances (the port is ``gpuorch.runners.port``).

- ``ssh``: ``SshRunner`` drives the agent on a VM over SSH/SFTP (paramiko).
- ``connection``: one cached, host-key-verified SSH connection with boot-time retries.
- ``keys``: per-job login keys and per-instance host keys (cryptography).
- ``hostkeys``: the pinned known_hosts file (stdlib).
- ``bundle``: the agent packed as one zipapp for upload (stdlib).
- ``sftp_util``: small SFTP helpers (exists, mkdir -p, atomic put, ranged read).
- ``volume_mount``: the script that mounts a job's EBS volume before the agent starts (stdlib).

Import the submodules directly: this package imports nothing, so the daemon pulls in paramiko
and cryptography only when a provider that uses SSH is configured. See docs/ssh.md.
"""

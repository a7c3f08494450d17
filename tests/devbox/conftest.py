"""Fixtures of the dev box tests: the SSH pool tests' real sshd "hosts" on 127.0.0.1
(tests/sshpool/conftest.py), the cheapest real-sshd path for ``gpuorch ssh`` and ``gpuorch port``."""

from __future__ import annotations

from tests.sshpool.conftest import pool_keys, pool_options, start_hosts

__all__ = ["pool_keys", "pool_options", "start_hosts"]

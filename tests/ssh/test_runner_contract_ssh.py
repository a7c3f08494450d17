"""The runner contract suite against the SSH runner, driving the real agent through the test
sshd (tests/ssh/sshd.py); the "instance" is this host."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from gpuorch.runners.ssh import SshRunner
from gpuorch.testing import RunnerContract

pytestmark = pytest.mark.aws


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


class TestSshRunnerContract(RunnerContract):
    timeout_s = 20.0

    @pytest.fixture
    def runner(self, make_runner: Callable[..., SshRunner]) -> SshRunner:
        return make_runner()

    @pytest.fixture
    def unreachable(self, make_runner: Callable[..., SshRunner]) -> SshRunner:
        """An address where nothing answers (a VM still booting its sshd)."""
        return make_runner(port=_closed_port())

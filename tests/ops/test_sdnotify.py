"""The sd_notify protocol against a real unix datagram socket (path and abstract namespace)."""

from __future__ import annotations

import pytest
from notify_socket import NotifySocket

from gpuorch.ops.sdnotify import Notifier, socket_address, watchdog_interval


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request):
    s = NotifySocket(abstract=request.param == "abstract")
    yield s
    s.close()


def test_ready_stopping_watchdog_reach_the_socket(notify_socket):
    env = {"NOTIFY_SOCKET": notify_socket.env_value, "WATCHDOG_USEC": "4000000"}
    n = Notifier.from_env(env)
    assert n.enabled and n.watchdog_s == 2.0  # half of WatchdogSec
    assert n.ready("serving")
    assert notify_socket.receive() == {"READY": "1", "STATUS": "serving"}
    assert n.watchdog()
    assert notify_socket.receive() == {"WATCHDOG": "1"}
    assert n.stopping()
    assert notify_socket.receive() == {"STOPPING": "1"}


def test_unset_removes_the_variables_so_children_do_not_inherit_them(notify_socket):
    env = {"NOTIFY_SOCKET": notify_socket.env_value, "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1", "PATH": "/bin"}
    n = Notifier.from_env(env, unset=True)
    assert env == {"PATH": "/bin"}
    assert n.ready()  # the notifier keeps what it read
    assert notify_socket.receive() == {"READY": "1"}


def test_without_a_socket_every_call_is_a_quiet_no_op():
    n = Notifier.from_env({})
    assert not n.enabled
    assert not n.ready() and not n.stopping() and not n.watchdog() and not n.status("x")


def test_a_vanished_socket_never_raises(notify_socket):
    n = Notifier.from_env({"NOTIFY_SOCKET": notify_socket.env_value})
    notify_socket.close()
    notify_socket._dir = None  # already removed
    assert n.ready() is False


def test_watchdog_only_when_asked_for_this_process():
    n = Notifier.from_env({"NOTIFY_SOCKET": "/nonexistent/socket"})
    assert n.watchdog_s is None and n.watchdog() is False
    assert watchdog_interval({"WATCHDOG_USEC": "6000000", "WATCHDOG_PID": "123"}, pid=123) == 3.0
    assert watchdog_interval({"WATCHDOG_USEC": "6000000", "WATCHDOG_PID": "123"}, pid=456) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None


@pytest.mark.parametrize("value, address", [
    ("/run/systemd/notify", "/run/systemd/notify"),
    ("@abstract/name", "\0abstract/name"),
    ("relative/path", None),
    ("vsock:2:1234", None),
    ("", None),
    (None, None),
])
def test_socket_address(value, address):
    assert socket_address(value) == address

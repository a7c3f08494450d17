"""A local instance's lock: ``.lock`` is a second name of its first record's file (no inode of its
own), stays that inode when the record is replaced, and excludes a second holder; where a hard link
cannot be made, ``locked`` makes the file as before."""

from __future__ import annotations

import fcntl
import os
from datetime import timedelta

import pytest

from gpuorch.clock import utcnow
from gpuorch.provider.localdir import InstanceDir, Meta
from gpuorch.provider.localdir import instances as instances_mod
from gpuorch.provider.port import InstanceState, Offer

OFFER = Offer(provider="local", region="r", zone="r-a", instance_type="t", gpu=None, price_per_hour=1.0)


def created(path) -> InstanceDir:
    now = utcnow()
    inst = InstanceDir(path / "local-1")
    assert inst.create(Meta(id=inst.id, client_token="t", tags={}, offer=OFFER, spot=False,
                            state=InstanceState.RUNNING, created_at=now, ready_at=now - timedelta(1)))
    return inst


def held_elsewhere(inst: InstanceDir) -> bool:
    fd = os.open(inst.path / ".lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_the_lock_is_the_first_records_inode_and_stays_it(tmp_path):
    inst = created(tmp_path)
    first = os.stat(inst.meta_file).st_ino
    assert os.stat(inst.path / ".lock").st_ino == first
    inst.update(lambda m: m.model_copy(update={"state_reason": "x"}))  # the record replaced: a new inode
    assert os.stat(inst.meta_file).st_ino != first and os.stat(inst.path / ".lock").st_ino == first
    assert inst.read().state_reason == "x"
    with inst.locked():
        assert held_elsewhere(inst)
    assert not held_elsewhere(inst)


def test_without_hard_links_locked_makes_the_file(tmp_path, monkeypatch):
    def no_links(*_a, **_k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(instances_mod.os, "link", no_links)
    inst = created(tmp_path)
    assert not (inst.path / ".lock").exists()
    with inst.locked():
        assert held_elsewhere(inst)
    assert os.stat(inst.path / ".lock").st_ino != os.stat(inst.meta_file).st_ino


def test_a_gone_instance_cannot_be_locked(tmp_path):
    from gpuorch.errors import NotFoundError

    with pytest.raises(NotFoundError), InstanceDir(tmp_path / "local-gone").locked():
        pass

"""``write_atomic``: the whole new content or the old, a private temp file beside the target, none
left behind; a stale temp file of an earlier process with the same pid is stepped over."""

from __future__ import annotations

import os
import stat

import pytest

from gpuorch.agent import protocol
from gpuorch.agent.protocol import write_atomic


def test_replaces_the_file_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "status.json"
    target.write_text("old")
    write_atomic(target, '{"state": "running", "note": "é"}', durable=False)
    assert target.read_text(encoding="utf-8") == '{"state": "running", "note": "é"}'
    write_atomic(target, "x" * 300_000)  # durable, and longer than one write may take
    assert target.read_text() == "x" * 300_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # as mkstemp made it: the agent's files are private


def test_a_stale_temp_file_with_the_next_name_is_stepped_over(tmp_path, monkeypatch):
    seq = iter(range(5, 100))
    monkeypatch.setattr(protocol, "_TMP_SEQ", seq)
    stale = tmp_path / f".agent.json.{os.getpid()}-5"  # left by a process that had this pid, crashed
    stale.write_text("stale")
    write_atomic(tmp_path / "agent.json", "{}")
    assert (tmp_path / "agent.json").read_text() == "{}"
    assert stale.read_text() == "stale"  # not ours: not touched


def test_a_failed_write_removes_its_temp_file_and_keeps_the_old_content(tmp_path, monkeypatch):
    target = tmp_path / "agent.json"
    target.write_text("old")

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(protocol.os, "write", full)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.json"]

"""Structured logs: one JSON object per line, job fields when known, journald priorities."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest

from gpuorch.clock import utcnow
from gpuorch.jobs import events
from gpuorch.ops.logfmt import configure_logging


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_json_lines_carry_job_fields_from_the_event_log(store, restore_root_logger):
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    with store.write() as s:
        events.record(s, utcnow(), "launched", "instance i-1 (pending)", job_id=7, attempt=2)
        events.record(s, utcnow(), "orphan_check", "nothing to sweep")
    logging.getLogger("gpuorch.test").debug("not at info level")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("gpuorch.test").exception("pass failed")
    records = [json.loads(line) for line in lines(out)]
    assert len(records) == 3
    first = records[0]
    assert set(first) == {"ts", "level", "logger", "message", "job_id", "attempt", "kind"}
    assert (first["level"], first["logger"], first["job_id"], first["attempt"], first["kind"]) == (
        "info", "gpuorch.events", 7, 2, "launched")
    assert first["message"] == "job 7 attempt 2: launched: instance i-1 (pending)" and first["ts"].endswith("Z")
    assert "job_id" not in records[1] and "attempt" not in records[1]  # only when known
    assert records[2]["level"] == "error" and "RuntimeError: boom" in records[2]["exc"]


def test_text_lines(restore_root_logger):
    out = io.StringIO()
    configure_logging("text", "warning", stream=out)
    logging.getLogger("gpuorch.x").info("hidden")
    logging.getLogger("gpuorch.x").warning("shown")
    assert len(lines(out)) == 1 and lines(out)[0].endswith("WARNING gpuorch.x: shown")


def test_on_the_journal_stream_lines_get_a_syslog_priority_prefix(tmp_path, monkeypatch, restore_root_logger):
    with open(tmp_path / "journal", "w") as stream:  # stands in for the socket systemd connects
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        configure_logging("json", "info", stream=stream)
        logging.getLogger("gpuorch.x").warning("careful")
        configure_logging("text", "info", stream=stream)
        logging.getLogger("gpuorch.x").error("bad\nsecond line")
    got = (tmp_path / "journal").read_text().splitlines()
    assert got[0].startswith("<4>{") and json.loads(got[0][3:])["message"] == "careful"
    assert got[1:] == ["<3>ERROR gpuorch.x: bad", "<3>second line"]  # journald adds the timestamp


def test_configuring_twice_replaces_the_handler(restore_root_logger):
    first, second = io.StringIO(), io.StringIO()
    configure_logging("text", "info", stream=first)
    configure_logging("json", "info", stream=second)
    logging.getLogger("gpuorch.x").info("once")
    assert lines(first) == [] and len(lines(second)) == 1

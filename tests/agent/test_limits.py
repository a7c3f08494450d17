"""``gpuorch.agent.limits``: what the agent and the daemon keep of a job's result and metrics lines.
Unit tests on real files; the daemon's side is tested through the assembled daemon
(tests/harness/test_result_limits.py)."""

from __future__ import annotations

import json

import pytest

from gpuorch.agent import limits
from gpuorch.agent.job import read_result
from gpuorch.agent.protocol import AgentStatus, read_status, status_from_bytes


def test_a_result_within_the_limits_is_kept_as_written(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"acc": 0.5, "nested": [[1, 2], {"a": "]}["}]}))
    assert read_result(tmp_path) == ({"acc": 0.5, "nested": [[1, 2], {"a": "]}["}]}, None)


def test_no_result_file_is_no_result(tmp_path):
    assert read_result(tmp_path) == (None, None)


def test_a_non_object_result_is_wrapped(tmp_path):
    (tmp_path / "result.json").write_text("[1, 2]")
    assert read_result(tmp_path) == ({"value": [1, 2]}, None)


@pytest.mark.parametrize("size", [limits.RESULT_MAX_BYTES + 1, 50 << 20])
def test_a_result_over_the_size_limit_is_dropped_with_its_size_and_the_advice(tmp_path, size):
    with open(tmp_path / "result.json", "wb") as f:
        f.truncate(size)  # sparse: only the size is read, never the contents
    result, why = read_result(tmp_path)
    assert result == {"dropped": "size", "message": why, "bytes": size, "limit_bytes": limits.RESULT_MAX_BYTES}
    shown = "50 MiB" if size == 50 << 20 else "65,537 bytes"
    assert why == (f"result.json is {shown}, over the 64 KiB limit; write large outputs to the checkpoint store "
                   "or a volume")


def test_exactly_the_limit_is_kept(tmp_path):
    text = json.dumps({"s": ""})
    text = json.dumps({"s": "x" * (limits.RESULT_MAX_BYTES - len(text))})
    assert len(text) == limits.RESULT_MAX_BYTES
    (tmp_path / "result.json").write_text(text)
    assert read_result(tmp_path)[1] is None


@pytest.mark.parametrize("depth", [limits.MAX_DEPTH + 1, 100_000])
def test_a_result_nested_past_the_limit_is_dropped_not_a_crash(tmp_path, depth):
    (tmp_path / "result.json").write_text("[" * depth + "]" * depth if depth < 30_000 else "[" * depth)
    result, why = read_result(tmp_path)
    assert result is not None and result["dropped"] in ("depth", "size") and why == result["message"]


def test_a_result_at_the_depth_limit_is_kept_and_brackets_in_strings_do_not_count(tmp_path):
    d = limits.MAX_DEPTH
    (tmp_path / "result.json").write_text("[" * d + '"[[[[{{{{"' + "]" * d)
    result, why = read_result(tmp_path)
    assert why is None and result is not None


@pytest.mark.parametrize("text, fragment", [("{not json", "is not JSON"), (b"\xff\xfe", "not UTF-8")])
def test_a_result_that_is_not_json_is_dropped_with_a_reason(tmp_path, text, fragment):
    path = tmp_path / "result.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    result, why = read_result(tmp_path)
    assert result is not None and result["dropped"] == "invalid" and fragment in (why or "")
    assert "\n" not in (why or "")


def test_non_finite_numbers_read_as_null(tmp_path):
    (tmp_path / "result.json").write_text('{"loss": NaN, "big": 1e400, "inf": -Infinity, "ok": 1.5}')
    assert read_result(tmp_path) == ({"loss": None, "big": None, "inf": None, "ok": 1.5}, None)


def test_the_daemon_bounds_what_an_agent_sent_again():
    assert limits.bounded_result({"a": 1}) == ('{"a":1}', None)
    assert limits.bounded_result(None) == (None, None)
    text, why = limits.bounded_result({"blob": "x" * (1 << 20)})
    assert json.loads(text or "")["dropped"] == "size" and "over the 64 KiB limit" in (why or "")
    deep: object = 1
    for _ in range(limits.MAX_DEPTH + 1):
        deep = [deep]
    text, why = limits.bounded_result({"d": deep})
    assert json.loads(text or "")["dropped"] == "depth" and "deeper than 32" in (why or "")
    text, why = limits.bounded_result({"nan": float("nan")})
    assert json.loads(text or "")["dropped"] == "invalid"


def test_metric_lines_over_the_limits_are_left_out_and_the_rest_kept():
    ok = b'{"step": 1, "loss": 0.5}\n'
    long = b'{"s": "' + b"x" * limits.METRICS_LINE_MAX_BYTES + b'"}\n'
    deep = b"[" * 100_000 + b"\n"
    assert limits.metric_lines(ok + long + deep + ok) == ok + ok
    assert limits.metric_lines(ok) == ok


def test_the_daemon_reads_a_status_within_bounds_only(tmp_path):
    st = AgentStatus(state="exited", exit_code=0, result={"a": 1})
    assert status_from_bytes(st.to_json().encode()) == st
    assert status_from_bytes(b"not json") is None and status_from_bytes(b"[1]") is None
    deep = status_from_bytes(b'{"result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert deep is not None and deep.state == "failed" and "nests deeper" in (deep.error or "")
    (tmp_path / "status.json").write_bytes(b" " * (limits.STATUS_MAX_BYTES + 1))
    big = read_status(tmp_path)
    assert big is not None and big.state == "failed" and "over the 4 MiB" in (big.error or "")
    with pytest.raises(ValueError):
        AgentStatus.from_json("[" * 100_000)


def test_size_text():
    assert [limits.size_text(n) for n in (5, 1024, 1536, 64 << 10, 50 << 20, 3 << 30)] == [
        "5 bytes", "1 KiB", "1.5 KiB", "64 KiB", "50 MiB", "3 GiB"]

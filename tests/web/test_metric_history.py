"""The metric history the sweep page plots: the daemon's copy of each attempt's metrics lines."""

from __future__ import annotations

from gpuorch.jobs.logmirror import LogMirror


def test_history_follows_the_attempts_in_order_and_keeps_only_numbers(tmp_path):
    m = LogMirror(tmp_path)
    m.append_metrics(3, 1, b'{"step": 10, "loss": 2.0}\n{"step": 20, "loss": 1.5, "note": "x"}\n')
    m.append_metrics(3, 1, b'not json\n{"step": 30, "loss": true}\n[1, 2]\n')
    m.append_metrics(3, 2, b'{"step": 20, "loss": 1.4}\n{"loss": 1.2}\n')  # resumed at step 20; then no step
    m.append_metrics(3, 2, b"")
    assert m.metric_history(3, [1, 2], "loss") == [(10.0, 2.0), (20.0, 1.5), (20.0, 1.4), (3.0, 1.2)]
    assert m.metric_history(3, [1, 2, 7], "acc") == []  # no such metric, no such attempt
    assert m.metric_history(3, [1, 2], "loss", limit=2) == [(20.0, 1.4), (3.0, 1.2)]

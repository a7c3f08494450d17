"""The dashboard's charts are pure functions: what they draw for given numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from gpuorch.web import svg

NS = "{http://www.w3.org/2000/svg}"


def _parse(markup: str) -> ET.Element:
    return ET.fromstring(markup.split("</svg>")[0] + "</svg>")  # the legend after it is HTML


def test_a_line_chart_draws_one_path_per_series_through_every_point():
    chart = svg.line_chart([("a", [(0, 1.0), (10, 0.5), (20, 0.25)]), ("b<&>", [(0, 2.0), (20, 1.0)])],
                           title="loss", x_label="step")
    paths = _parse(chart).findall(f".//{NS}path")
    assert [p.get("data-series") for p in paths] == ["a", "b<&>"]  # escaped in markup, intact when parsed
    assert [len(re.findall(r"[ML]", p.get("d"))) for p in paths] == [3, 2]
    assert 'class="legend"' in chart


def test_points_keep_their_order_on_the_plot():
    chart = svg.line_chart([("a", [(0, 0.0), (1, 10.0)])], title="t")
    (path,) = _parse(chart).findall(f".//{NS}path")
    (x0, y0), (x1, y1) = [tuple(map(float, xy.split(","))) for xy in re.findall(r"[ML]([\d.]+,[\d.]+)", path.get("d"))]
    assert x1 > x0 and y1 < y0  # higher values are drawn higher up


def test_a_cap_line_and_a_staircase_for_spend():
    chart = svg.line_chart([("spent", [(0, 0.0), (60, 1.0), (120, 2.0)])], title="spend", hline=(5.0, "cap $5.00"),
                           step=True, x_is_time=True)
    root = _parse(chart)
    assert len(root.findall(f".//{NS}line[@class='cap']")) == 1
    assert "H" in root.find(f".//{NS}path").get("d")  # flat between charges
    assert "cap $5.00" in chart


def test_empty_data_says_so():
    assert "no data yet" in svg.line_chart([("a", [])], title="t")
    assert "nothing billed" in svg.bar_chart([], title="t")
    assert "not launched yet" in svg.timeline([], title="t", now=datetime.now(UTC))


def test_bars_over_their_cap_are_marked():
    chart = svg.bar_chart([("lr", 3.0), ("mlp", 1.0)], title="by sweep", caps=[2.0, None])
    bars = _parse(chart).findall(f".//{NS}rect")
    assert [(b.get("data-label"), b.get("fill")) for b in bars] == [("lr", "#e15759"), ("mlp", svg.PALETTE[0])]
    assert len(_parse(chart).findall(f".//{NS}line[@class='cap']")) == 1


def test_the_timeline_places_attempts_in_time():
    t0 = datetime(2026, 3, 1, 8, tzinfo=UTC)
    spans = [{"number": 1, "start": t0, "end": t0 + timedelta(hours=1), "outcome": "preempted", "label": "a"},
             {"number": 2, "start": t0 + timedelta(hours=1), "end": None, "outcome": "running", "label": "b"}]
    rects = _parse(svg.timeline(spans, title="t", now=t0 + timedelta(hours=3))).findall(f".//{NS}rect")
    (x1, w1), (x2, w2) = [(float(r.get("x")), float(r.get("width"))) for r in rects]
    assert x2 > x1 and abs(w2 - 2 * w1) < 1  # the running one is drawn up to now: twice as long
    assert [r.get("fill") for r in rects] == [svg.OUTCOME_COLOURS["preempted"], svg.OUTCOME_COLOURS["running"]]


def test_time_ticks_fall_on_round_times():
    t0 = datetime(2026, 3, 1, 8, 0, 7, tzinfo=UTC).timestamp()
    assert [t % 5 for t in svg._time_ticks(t0, t0 + 21)] == [0] * 4  # 5 s apart, on the 5 s
    assert [t % 3600 for t in svg._time_ticks(t0, t0 + 5 * 3600)] == [0] * 5  # hourly


def _ys(path: ET.Element) -> list[float]:
    return [float(xy.split(",")[1]) for xy in re.findall(r"[ML]([\d.]+,[\d.]+)", path.get("d"))]


def test_a_log_axis_spreads_curves_a_linear_one_flattens():
    # eight trials from 2.3 to their own floor between 1e-3 and 1e-2: on a linear axis they all lie
    # within a few pixels of one another after the start; on a log one they are far apart
    floors = [10 ** (-3 + i / 7) for i in range(8)]
    series = [(f"t{i}", [(s, max(2.3 * 0.9 ** (s / 10), f)) for s in range(0, 2001, 50)])
              for i, f in enumerate(floors)]
    assert svg.wants_log(series)
    spread = {}
    for log in (False, True):
        root = _parse(svg.line_chart(series, title="loss", log_y=log))
        assert root.get("data-scale") == ("log" if log else "linear")
        ends = [_ys(p)[-1] for p in root.findall(f".//{NS}path")]
        spread[log] = max(ends) - min(ends)
    assert spread[False] < 2 and spread[True] > 50  # pixels between the highest and lowest end
    ticks = [t.text for t in _parse(svg.line_chart(series, title="loss", log_y=True)).findall(f".//{NS}text")
             if t.get("class") == "tick"]
    assert {"0.001", "0.01", "0.1", "1"} <= set(ticks)  # decades


def test_the_default_scale_is_linear_unless_positive_values_span_orders_of_magnitude():
    assert not svg.wants_log([("a", [(0, 0.9), (1, 0.5)])])  # a factor of 2
    assert not svg.wants_log([("a", [(0, 2.3), (1, 0.0)])])  # zero has no place on a log axis
    assert not svg.wants_log([("a", [(0, 2.3), (1, -0.1)])])
    assert not svg.wants_log([])
    assert svg.wants_log([("a", [(0, 2.3)]), ("b", [(5, 0.05)])])


def test_a_log_axis_leaves_out_what_it_cannot_draw_and_says_so():
    chart = svg.line_chart([("a", [(0, 1.0), (1, 0.0), (2, -1.0), (3, 0.1)])], title="t", log_y=True)
    (path,) = _parse(chart).findall(f".//{NS}path")
    assert len(_ys(path)) == 2 and "2 points &lt;= 0 not shown" in chart
    assert "no data yet" in svg.line_chart([("a", [(0, 0.0)])], title="t", log_y=True)


def test_the_best_trial_is_drawn_on_top_thicker_with_a_ring_on_its_point():
    chart = svg.line_chart([("a", [(0, 1.0), (10, 0.5)]), ("best", [(0, 1.0), (10, 0.1)]), ("c", [(0, 1.0)])],
                           title="loss", best=("best", (10, 0.1), "best: best loss=0.1 at step 10"))
    root = _parse(chart)
    paths = root.findall(f".//{NS}path")
    assert paths[-1].get("data-series") == "best" and paths[-1].get("class") == "series best"
    assert float(paths[-1].get("stroke-width")) > float(paths[0].get("stroke-width"))
    (ring,) = root.findall(f".//{NS}circle")
    assert ring.get("class") == "best-marker" and ring.get("data-series") == "best"
    x, y = _ys(paths[-1])[-1], float(ring.get("cy"))
    assert abs(x - y) < 0.2  # on the curve's last point
    assert "<li class=best>" in chart and "best (best)" in chart

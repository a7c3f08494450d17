"""The sweep page: every trial's objective metric on one plot (log or linear, the best trial
marked), spend against the cap over time, the CLI's spend split (``sweeps.report``: finished,
pruned, held, running, unfinished, wasted), the attempt and preemption counts, the trials table
and the actions (``web.forms``)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from gpuorch.jobs.counts import runs_label
from gpuorch.sweeps.report import BUCKETS
from gpuorch.web import forms, svg
from gpuorch.web.pages import _cap, _cell, _status, _ts, _usd, layout, table

SCALES = ("auto", "log", "linear")


def _duration(seconds: float) -> str:
    m, sec = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def _best_point(best: dict[str, Any] | None, curves: Sequence[tuple[str, Sequence[tuple[float, float]]]],
                metric: str) -> tuple[str, tuple[float, float], str] | None:
    """Where the best trial's ring goes: the last point of its curve with the value it is ranked
    by (its latest), else its curve's last point."""
    if best is None:
        return None
    points = next((sorted(s) for n, s in curves if n == best["name"]), [])
    if not points:
        return None
    at = next((p for p in reversed(points) if best["value"] is not None and p[1] == best["value"]), points[-1])
    flag = " (unfinished)" if best.get("unfinished") else ""
    return best["name"], at, f"best: {best['name']} {metric}={at[1]:.6g} at step {at[0]:.0f}{flag}"


def _scale_links(ref: str, scale: str, log: bool) -> str:
    links = []
    for s in SCALES:
        label = f"auto ({'log' if log else 'linear'})" if s == "auto" else s
        href = f"/ui/sweeps/{quote(ref)}?scale={s}"
        links.append(f"<strong>{label}</strong>" if s == scale else f'<a href="{href}">{label}</a>')
    return f'<p class="scale hint">y axis: {" · ".join(links)}</p>'


def _spend_split(w: dict[str, Any]) -> str:
    """The CLI's footer as a table: what the money bought."""
    spent = w["spent"]
    rows = [[escape(k), _usd(w["spend"][k]), f"{100 * w['spend'][k] / spent:.0f} %" if spent > 0 else "-"]
            for k in BUCKETS if w["spend"][k] or k in ("finished", "pruned", "held", "wasted")]
    line = (f"<p>spend {_usd(spent)}: " + ", ".join(f"{_usd(w['spend'][k])} {escape(k)}" for k in BUCKETS
                                                    if w["spend"][k] or k in ("finished", "pruned", "held", "wasted"))
            + f" ({w['wasted_share']:.0%} wasted)</p>")
    return line + table(["USE", "USD", "SHARE"], rows, "split")


def sweep_page(data: dict[str, Any], csrf: str | None = None, *, scale: str = "auto", notice: str | None = None,
               error: str | None = None) -> str:
    """``scale``: the metric plot's y axis, ``auto`` (log when the values span orders of
    magnitude: ``svg.wants_log``), ``log`` or ``linear``; ``csrf``: the session's token for the
    action forms (None: no forms)."""
    w = data["sweep"]
    obj = w["objective"]
    trials = w["trials"]
    params = sorted({k for t in trials for k in t["params"]})
    metrics = sorted({k for t in trials for k in t["metrics"]})
    if obj and obj["metric"] in metrics:
        metrics.remove(obj["metric"])
        metrics.insert(0, obj["metric"])
    best_name = w["best"]["name"] if w["best"] else None
    rows = [[f'<a href="/ui/jobs/{t["id"]}">{t["id"]}</a>', escape(t["name"]), _status(t["status"]),
             *[_cell(t["params"].get(p)) for p in params], *[_cell(t["metrics"].get(m)) for m in metrics],
             _duration(t["runtime_s"]), runs_label(t), str(t["preemptions"]), _usd(t["cost"]),
             escape(t["message"] or "")] for t in trials]
    cols = ["", "", "", *["opt"] * len(params), *["" if i == 0 else "opt" for i in range(len(metrics))],
            "opt", "", "", "", "wrap"]
    trial_table = table(["ID", "TRIAL", "STATUS", *params, *metrics, "RUNTIME", "RUNS", "PREEMPT", "COST", "NOTE"],
                        rows, "trials", cols=cols, row_cls=["best" if t["name"] == best_name else "" for t in trials])
    runs = {"runs": sum(t["runs"] for t in trials), "tries": sum(t["tries"] for t in trials), "attempts": 0}
    objective = escape(f"{obj['mode']} {obj['metric']}") if obj else "-"
    best_line = "-"
    if w["best"] and obj:
        flag = " (unfinished)" if w["best"].get("unfinished") else ""
        best_line = f"{escape(w['best']['name'])} {escape(obj['metric'])}={_cell(w['best']['value'])}{flag}"
    summary = (f"<dl class=summary><dt>status</dt><dd>{_status(w['status'])} {escape(w['message'] or '')}</dd>"
               f"<dt>spent</dt><dd>{_usd(w['spent'])} of {_cap(w['max_cost'])}</dd>"
               f"<dt>deadline</dt><dd>{_ts(w['deadline'])}</dd>"
               f"<dt>objective</dt><dd>{objective}</dd><dt>best</dt><dd>{best_line}</dd>"
               f"<dt>attempts</dt><dd id=sweep-runs>{runs_label(runs)} runs</dd>"
               f"<dt>preemptions</dt><dd id=sweep-preemptions>{sum(t['preemptions'] for t in trials)}</dd></dl>")
    if obj:
        log = svg.wants_log(data["curves"]) if scale == "auto" else scale == "log"
        curves = _scale_links(str(w["id"]), scale, svg.wants_log(data["curves"])) + svg.line_chart(
            data["curves"], title=f"{obj['metric']} of every trial", x_label="step", y_label=obj["metric"],
            log_y=log, best=_best_point(w["best"], data["curves"], obj["metric"]))
    else:
        curves = "<p>The sweep has no objective metric to plot.</p>"
    cap = (w["max_cost"], f"cap ${w['max_cost']:.2f}") if w["max_cost"] is not None else None
    spend = svg.line_chart([("spent", data["spend"])], title="spend against the cap", x_label="time (UTC)",
                           y_label="USD", hline=cap, step=True, x_is_time=True)
    body = (summary + forms.sweep_actions(w, csrf)
            + f"<section id=curves><h2>{escape(obj['metric']) if obj else 'Metrics'} by step</h2>{curves}"
            "</section><section id=spend><h2>Spend</h2>" + spend + _spend_split(w)
            + "</section><section id=trials><h2>Trials</h2>" + trial_table + "</section>")
    return layout(f"sweep {w['name']}", body, "sweeps", data["daemon"], notice=notice, error=error,
                  refresh=error is None)

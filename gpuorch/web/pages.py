"""The dashboard's HTML: pure functions from the loaded data (``web.data``) to a page.

Every value from the store is escaped (job names, messages and log lines are user input).
Pages carry no script; charts are inline SVG (``web.svg``); one stylesheet from ``/ui/static``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

from gpuorch.jobs.counts import runs_label
from gpuorch.web import svg

NAV = (("jobs", "Jobs"), ("sweeps", "Sweeps"), ("costs", "Costs"), ("daemon", "Daemon"))


def _ts(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:%Y-%m-%d %H:%M:%S}" if isinstance(v, datetime) else escape(str(v))


def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:.4f}"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict | list):
        return f"<code>{escape(json.dumps(v))}</code>"
    return escape(str(v))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """Cells are already HTML (escape them before)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _status(s: str) -> str:
    return f'<span class="status status-{escape(s)}">{escape(s)}</span>'


def daemon_banner(state: dict[str, Any] | None) -> str:
    if state is None or state["alive"]:
        return ""
    from gpuorch.store.heartbeat import warning

    return f'<p class="banner" role="alert">{escape(warning(state) or "")}</p>'


def layout(title: str, body: str, active: str = "", daemon: dict[str, Any] | None = None) -> str:
    nav = "".join(f'<a href="/ui/{k}"{" class=active" if k == active else ""}>{v}</a>' for k, v in NAV)
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)} · gpuorch</title>"
            '<link rel=stylesheet href="/ui/static/style.css"></head><body>'
            f'<header><a class=brand href="/ui/jobs">gpuorch</a><nav>{nav}</nav>'
            '<form method=post action="/ui/logout" class=logout><button>log out</button></form></header>'
            f"<main>{daemon_banner(daemon)}<h1>{escape(title)}</h1>{body}</main></body></html>\n")


def login_page(next_url: str, error: str | None = None) -> str:
    err = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1"><title>log in · gpuorch</title>'
            '<link rel=stylesheet href="/ui/static/style.css"></head><body><main class=login>'
            f"<h1>gpuorch</h1>{err}<form method=post action=/ui/login>"
            f'<input type=hidden name=next value="{escape(next_url)}">'
            "<label for=token>API token</label>"
            '<input id=token name=token type=password autocomplete=current-password required autofocus>'
            "<button type=submit>log in</button></form>"
            "<p class=hint>The token of this server: <code>GPUORCH_API_TOKEN</code>, <code>api.token</code> or "
            "<code>api.token_file</code> (docs/dashboard.md).</p></main></body></html>\n")


def _job_link(j: dict[str, Any]) -> str:
    return f'<a href="/ui/jobs/{j["id"]}">{escape(str(j["id"]))}</a>'


MAX_JOB_ROWS = 500  # newest first; the rest through `gpuorch status --json`


def jobs_page(data: dict[str, Any]) -> str:
    newest = list(reversed(data["jobs"]))[:MAX_JOB_ROWS]
    rows = [[_job_link(j), escape(j["name"]), _status(j["status"]), runs_label(j), str(j["preemptions"]),
             escape(j["where"] or "-"), escape(j["last_checkpoint"] or "-"), _usd(j["cost"]),
             escape(j["message"] or "")] for j in newest]
    body = table(["ID", "NAME", "STATUS", "RUNS", "PREEMPT", "WHERE", "CHECKPOINT", "COST", "NOTE"], rows, "jobs")
    if len(data["jobs"]) > len(newest):
        body += (f"<p class=hint>The newest {len(newest)} of {len(data['jobs'])} jobs; "
                 "<code>gpuorch status --json</code> lists them all.</p>")
    if not data["jobs"]:
        body = "<p>No jobs yet: <code>gpuorch submit job.yaml</code>.</p>"
    return layout("Jobs", body, "jobs", data["daemon"])


def _market(a: dict[str, Any]) -> str:
    return "spot" if a["spot"] else "on-demand"


def _outcome(a: dict[str, Any]) -> str:
    return str(a["reason"] or ("running" if a["ended_at"] is None else a["status"]))


def _span_label(a: dict[str, Any]) -> str:
    parts = [a["zone"], _market(a), _outcome(a)]
    if a["resumed_from"]:
        parts.append(f"from {a['resumed_from']}")
    if a["lost_work_s"] is not None:
        parts.append(f"lost {a['lost_work_s']:.0f}s")
    return " · ".join([*parts, f"${a['cost']:.2f}"])


def job_page(data: dict[str, Any], now: datetime) -> str:
    j = data["job"]
    attempts = j["attempt_list"]
    spans = [{"number": a["number"], "start": a["started_at"] or a["requested_at"], "end": a["ended_at"],
              "outcome": _outcome(a), "label": _span_label(a)} for a in attempts]
    summary = (f"<dl class=summary><dt>status</dt><dd>{_status(j['status'])} {escape(j['message'] or '')}</dd>"
               f"<dt>cost</dt><dd>{_usd(j['cost'])}</dd><dt>runs</dt><dd>{runs_label(j)} "
               f"({j['preemptions']} preempted)</dd><dt>lost work</dt><dd>{j['lost_work_s']:.0f} s</dd>"
               f"<dt>created</dt><dd>{_ts(j['created_at'])}</dd><dt>finished</dt><dd>{_ts(j['finished_at'])}</dd>"
               f"<dt>result</dt><dd>{_cell(j['result'])}</dd></dl>")
    rows = [[str(a["number"]), _status(a["status"]), escape(_outcome(a)), escape(a["provider"]), escape(a["zone"]),
             escape(a["instance_type"]), _market(a), escape(a["resumed_from"] or "-"),
             escape(a["last_checkpoint"] or "-"),
             "-" if a["lost_work_s"] is None else f"{a['lost_work_s']:.0f} s", _usd(a["cost"]),
             _ts(a["started_at"]), _ts(a["ended_at"])] for a in attempts]
    attempts_table = table(["#", "STATUS", "OUTCOME", "PROVIDER", "ZONE", "TYPE", "MARKET", "RESUMED FROM",
                            "LAST CKPT", "LOST WORK", "COST", "STARTED", "ENDED"], rows, "attempts")
    events = [[_ts(e["ts"]), "-" if e["attempt"] is None else str(e["attempt"]), escape(e["kind"]),
               escape(e["message"])] for e in data["events"]]
    body = (summary + '<section id=timeline><h2>Attempts</h2>'
            + svg.timeline(spans, title=f"attempts of job {j['id']}", now=now) + attempts_table + "</section>"
            + "<section id=events><h2>Events</h2>" + table(["TIME", "ATT", "KIND", "MESSAGE"], events, "events")
            + "</section><section id=log><h2>Log (tail)</h2>"
            + f"<pre class=log>{escape(data['log_tail']) or '(no output yet)'}</pre></section>")
    return layout(f"job {j['id']} {j['name']}", body, "jobs", data["daemon"])


def _sweep_link(w: dict[str, Any]) -> str:
    return f'<a href="/ui/sweeps/{quote(str(w["id"]))}">{escape(w["name"])}</a>'


def _cap(v: float | None) -> str:
    return "(no cap)" if v is None else f"${v:.2f}"


def sweeps_page(data: dict[str, Any]) -> str:
    rows = []
    for w in reversed(data["sweeps"]):
        obj, best = w["objective"], w["best"]
        best_cell = "-"
        if best:  # its value is the objective's (a metric, or the result file's) and may be unfinished
            flag = " (unfinished)" if best.get("unfinished") else ""
            if flag and best.get("step") is not None:
                flag = f" (unfinished, step {best['step']:.0f})"
            best_cell = f"{escape(best['name'])} {escape(obj['metric'])}={_cell(best['value'])}{flag}"
        rows.append([str(w["id"]), _sweep_link(w), _status(w["status"]),
                     escape(", ".join(f"{n} {s}" for s, n in sorted(w["counts"].items())) or "-"),
                     _usd(w["spent"]), _cap(w["max_cost"]), _ts(w["deadline"]), best_cell])
    body = table(["ID", "NAME", "STATUS", "TRIALS", "SPENT", "CAP", "DEADLINE", "BEST"], rows, "sweeps")
    if not data["sweeps"]:
        body = "<p>No sweeps yet: <code>gpuorch sweep submit sweep.yaml</code>.</p>"
    return layout("Sweeps", body, "sweeps", data["daemon"])


def sweep_page(data: dict[str, Any]) -> str:
    w = data["sweep"]
    obj = w["objective"]
    params = sorted({k for t in w["trials"] for k in t["params"]})
    metrics = sorted({k for t in w["trials"] for k in t["metrics"]})
    if obj and obj["metric"] in metrics:
        metrics.remove(obj["metric"])
        metrics.insert(0, obj["metric"])
    rows = [[f'<a href="/ui/jobs/{t["id"]}">{t["id"]}</a>', escape(t["name"]), _status(t["status"]),
             *[_cell(t["params"].get(p)) for p in params], *[_cell(t["metrics"].get(m)) for m in metrics],
             runs_label(t), _usd(t["cost"]), escape(t["message"] or "")] for t in w["trials"]]
    trial_table = table(["ID", "TRIAL", "STATUS", *params, *metrics, "RUNS", "COST", "NOTE"], rows, "trials")
    objective = escape(f"{obj['mode']} {obj['metric']}") if obj else "-"
    summary = (f"<dl class=summary><dt>status</dt><dd>{_status(w['status'])} {escape(w['message'] or '')}</dd>"
               f"<dt>spent</dt><dd>{_usd(w['spent'])} of {_cap(w['max_cost'])}</dd>"
               f"<dt>deadline</dt><dd>{_ts(w['deadline'])}</dd>"
               f"<dt>objective</dt><dd>{objective}</dd></dl>")
    if obj:
        curves = svg.line_chart(data["curves"], title=f"{obj['metric']} of every trial", x_label="step",
                                y_label=obj["metric"])
    else:
        curves = "<p>The sweep has no objective metric to plot.</p>"
    cap = (w["max_cost"], f"cap ${w['max_cost']:.2f}") if w["max_cost"] is not None else None
    spend = svg.line_chart([("spent", data["spend"])], title="spend against the cap", x_label="time (UTC)",
                           y_label="USD", hline=cap, step=True, x_is_time=True)
    body = (summary + f"<section id=curves><h2>{escape(obj['metric']) if obj else 'Metrics'} by step</h2>{curves}"
            "</section><section id=spend><h2>Spend</h2>" + spend + "</section><section id=trials><h2>Trials</h2>"
            + trial_table + "</section>")
    return layout(f"sweep {w['name']}", body, "sweeps", data["daemon"])


def costs_page(data: dict[str, Any]) -> str:
    by = data["by"]
    days = [(r["key"], r["cost"]) for r in by["day"]["rows"]]
    cap = data["daily_cap"]
    day_chart = svg.bar_chart(days, title="spend by UTC day", cap=cap, cap_label="daily cap")
    prov = svg.bar_chart([(r["key"], r["cost"]) for r in by["provider"]["rows"]], title="spend by provider")
    sweeps = by["sweep"]["rows"]
    sweep_chart = svg.bar_chart([(str(r["key"]), r["cost"]) for r in sweeps], title="spend by sweep",
                                caps=[r.get("max_cost") for r in sweeps])
    # cost_report counts the attempts it bills: those that got an instance (runs)
    sweep_rows = [[escape(str(r["key"])), _usd(r["cost"]), _cap(r.get("max_cost")), str(r["attempts"])] for r in sweeps]
    cap_line = f"daily cap {_cap(cap)}" if cap is not None else "no daily cap (daily_budget)"
    body = (f"<p>All time {_usd(by['provider']['total'])}; last {data['days']} days "
            f"{_usd(by['day']['total'])}; {cap_line}.</p>"
            f"<section id=by-day><h2>By day</h2>{day_chart}</section>"
            f"<section id=by-provider><h2>By provider</h2>{prov}</section>"
            f"<section id=by-sweep><h2>By sweep</h2>{sweep_chart}"
            + table(["SWEEP", "SPENT", "CAP", "RUNS"], sweep_rows, "costs") + "</section>")
    return layout("Costs", body, "costs", data["daemon"])


def daemon_page(data: dict[str, Any]) -> str:
    d = data["daemon"]
    state = "alive" if d["alive"] else "not running"
    rows = [[escape(x["owner"]), escape(x["host"]), str(x["pid"]), escape(x["version"]),
             "yes" if x["alive"] else "no", _ts(x["started_at"]), _ts(x["last_pass_at"]),
             escape(x["last_outcome"] or "-"), _ts(x["stopped_at"]), str(x["jobs_held"])] for x in d["daemons"]]
    body = (f'<p class="daemon-state daemon-{"alive" if d["alive"] else "down"}">Daemon: <strong>{state}</strong>; '
            f"last pass {_ts(d['last_pass_at'])} UTC"
            + (f" ({d['age_s']:.0f} s ago, {escape(d['last_outcome'] or '')})" if d["age_s"] is not None else "")
            + "</p>" + table(["DAEMON", "HOST", "PID", "VERSION", "ALIVE", "STARTED", "LAST PASS", "OUTCOME",
                              "STOPPED", "JOBS HELD"], rows, "daemons"))
    return layout("Daemon", body, "daemon", d)

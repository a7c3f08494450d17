"""The dashboard's HTML: pure functions from the loaded data (``web.data``) to a page.

Every value from the store is escaped (job names, messages and log lines are user input).
Charts are inline SVG (``web.svg``); one stylesheet and one small script (``live.js``: the
automatic refresh) from ``/ui/static``, never inline. Action forms: ``web.forms``; the sweep
page: ``web.sweep_page``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote

from gpuorch.jobs.counts import runs_label
from gpuorch.web import forms, svg

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


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "", *,
          cols: Sequence[str] | None = None, row_cls: Sequence[str] | None = None) -> str:
    """Cells are already HTML (escape them before). ``cols``: a class per column, ``opt`` (hidden on
    a phone) and/or ``wrap`` (long text that wraps rather than widening the table); ``row_cls``: a
    class per row."""
    def c(i: int) -> str:
        return f' class="{cols[i]}"' if cols and i < len(cols) and cols[i] else ""

    head = "".join(f"<th{c(i)}>{escape(h)}</th>" for i, h in enumerate(headers))
    body = "".join((f'<tr class="{row_cls[n]}">' if row_cls and row_cls[n] else "<tr>")
                   + "".join(f"<td{c(i)}>{v}</td>" for i, v in enumerate(r)) + "</tr>" for n, r in enumerate(rows))
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _status(s: str) -> str:
    return f'<span class="status status-{escape(s)}">{escape(s)}</span>'


def daemon_banner(state: dict[str, Any] | None) -> str:
    if state is None or state["alive"]:
        return ""
    from gpuorch.store.heartbeat import warning

    return f'<p class="banner" role="alert">{escape(warning(state) or "")}</p>'


REFRESH_S = 10  # how often live.js reloads a page's content in place


def layout(title: str, body: str, active: str = "", daemon: dict[str, Any] | None = None, *,
           notice: str | None = None, error: str | None = None, refresh: bool = True) -> str:
    """``notice``: what an action just did; ``error``: the one line an action was refused with.
    ``refresh``: whether live.js reloads the content (not on the answer to a refused POST, whose
    address is the action's, not a page's)."""
    nav = "".join(f'<a href="/ui/{k}"{" class=active" if k == active else ""}>{v}</a>' for k, v in NAV)
    said = (f'<p class="notice" role="status">{escape(notice)}</p>' if notice else "") + \
        (f'<p class="error" role="alert">{escape(error)}</p>' if error else "")
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)} · gpuorch</title>"
            '<link rel=stylesheet href="/ui/static/style.css"><script src="/ui/static/live.js" defer></script>'
            f'</head><body data-refresh="{REFRESH_S if refresh else 0}">'
            f'<header><a class=brand href="/ui/jobs">gpuorch</a><nav>{nav}</nav>'
            '<span class=live><span id=live-status></span> <button type=button id=live-toggle hidden>pause</button>'
            '</span><form method=post action="/ui/logout" class=logout><button>log out</button></form></header>'
            f"<main>{daemon_banner(daemon)}{said}<h1>{escape(title)}</h1>{body}</main></body></html>\n")


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


def jobs_page(data: dict[str, Any], csrf: str | None = None, *, notice: str | None = None) -> str:
    """``csrf``: the session's token for each unfinished job's Cancel (None: a bearer-token request, no forms)."""
    newest = list(reversed(data["jobs"]))[:MAX_JOB_ROWS]
    asked = data.get("cancelling", set())
    # KIND: job, or dev (a dev box: docs/dev-boxes.md), as `gpuorch status` shows it; hidden on a phone
    rows = [[_job_link(j), escape(j["name"]), escape(j.get("kind", "job")), _status(j["status"]), runs_label(j),
             str(j["preemptions"]), escape(j["where"] or "-"), escape(j["last_checkpoint"] or "-"), _usd(j["cost"]),
             escape(j["message"] or "")] for j in newest]
    headers = ["ID", "NAME", "KIND", "STATUS", "RUNS", "PREEMPT", "WHERE", "CHECKPOINT", "COST", "NOTE"]
    cols = ["", "wrap", "opt", "", "brk", "opt", "opt wrap", "opt wrap", "", "wrap"]  # brk: "1 (3 tries)" may break
    acts = [forms.job_row_action(j, j["id"] in asked, csrf) for j in newest]
    if any(acts):  # a column only where some row can be acted on (a session, an unfinished job)
        for row, act in zip(rows, acts, strict=True):
            row.append(act)
        headers, cols = [*headers, ""], [*cols, "act"]
    body = table(headers, rows, "jobs", cols=cols)
    if len(data["jobs"]) > len(newest):
        body += (f"<p class=hint>The newest {len(newest)} of {len(data['jobs'])} jobs; "
                 "<code>gpuorch status --json</code> lists them all.</p>")
    if data.get("warm"):  # idle and billed, for the next job that fits (spec keep_warm, docs/money.md)
        body += "<h2>Warm instances</h2>" + table(
            ["INSTANCE", "WHERE", "STATUS", "LEFT BY JOB", "IDLE", "IDLE COST", "KEPT UNTIL"],
            [[escape(w["instance_id"]), escape(f"{w['provider']}/{w['zone']}/{w['instance_type']}"),
              escape(w["status"]), str(w["job_id"]), f"{w['idle_s']:.0f}s", _usd(w["idle_usd"]),
              escape(w["keep_until"][:19])]
             for w in data["warm"]], "warm")
    if not data["jobs"]:
        body = "<p>No jobs yet: <code>gpuorch submit job.yaml</code>.</p>"
    return layout("Jobs", body, "jobs", data["daemon"], notice=notice)


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


def job_page(data: dict[str, Any], now: datetime, csrf: str | None = None, *, notice: str | None = None,
             error: str | None = None) -> str:
    """``csrf``: the session's token for the cancel form (None: a bearer-token request, no form)."""
    j = data["job"]
    attempts = j["attempt_list"]
    spans = [{"number": a["number"], "start": a["started_at"] or a["requested_at"], "end": a["ended_at"],
              "outcome": _outcome(a), "label": _span_label(a)} for a in attempts]
    summary = (f"<dl class=summary><dt>kind</dt><dd>{escape(j.get('kind', 'job'))}</dd>"
               f"<dt>status</dt><dd>{_status(j['status'])} {escape(j['message'] or '')}</dd>"
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
                            "LAST CKPT", "LOST WORK", "COST", "STARTED", "ENDED"], rows, "attempts",
                           cols=["", "", "", "opt", "", "opt", "", "opt wrap", "opt wrap", "opt", "", "opt", "opt"])
    events = [[_ts(e["ts"]), "-" if e["attempt"] is None else str(e["attempt"]), escape(e["kind"]),
               escape(e["message"])] for e in data["events"]]
    body = (summary + forms.job_actions(j, data["events"], csrf) + '<section id=timeline><h2>Attempts</h2>'
            + svg.timeline(spans, title=f"attempts of job {j['id']}", now=now) + attempts_table + "</section>"
            + "<section id=events><h2>Events</h2>" + table(["TIME", "ATT", "KIND", "MESSAGE"], events, "events")
            + "</section><section id=log><h2>Log (tail)</h2>"
            + f"<pre class=log>{escape(data['log_tail']) or '(no output yet)'}</pre></section>")
    return layout(f"job {j['id']} {j['name']}", body, "jobs", data["daemon"], notice=notice, error=error,
                  refresh=error is None)


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
    return layout("Daemon", body + _notifications(data.get("notifications")), "daemon", d)


def _notifications(h: dict[str, Any] | None) -> str:
    """The outbox's deliveries (docs/notifications.md): how many went, are being retried, were dropped."""
    if h is None or not (h["counts"] or h["dead"]):
        return ""
    counts = ", ".join(f"{n} {escape(str(k))}" for k, n in sorted(h["counts"].items()))
    retrying = f'; <strong class="bad">{h["retrying"]} failing, being retried</strong>' if h["retrying"] else ""
    rows = [[escape(d["type"]), escape(d["route"]), str(d["tries"]), escape(d["error"] or "-"), escape(d["uid"])]
            for d in h["dead"]]
    dead = ("<p>Dropped after their last retry (newest first; <code>gpuorch events</code> lists each as "
            "<code>notification_dead</code>):</p>" + table(["EVENT", "ROUTE", "TRIES", "LAST ERROR", "ID"], rows,
                                                          "dead", cols=["", "", "", "wrap", "opt"])) if rows else ""
    return f"<section id=notifications><h2>Notifications</h2><p>Deliveries: {counts}{retrying}.</p>{dead}</section>"

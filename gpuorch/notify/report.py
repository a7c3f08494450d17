"""The morning report: one message for one or more ended sweeps, what finished (the trials, best
first, with their parameters), what it cost against the cap and what was wasted, the
preemptions survived and why anything stopped. Built from ``gpuorch sweep status``'s table
(``sweeps.report``) and ``gpuorch cost`` (``money.report``), so all three agree."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session

from gpuorch.money.report import cost_report
from gpuorch.store.models import Sweep
from gpuorch.sweeps.report import sweep_report

MAX_ROWS = 20  # trials listed in a message; the rest are counted
_OK = {"succeeded"}


def _value(v: Any) -> str:
    return "-" if v is None else f"{v:.6g}"


def _params(p: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())[:200]


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """What the report says of one sweep, as data (the webhook body's ``data.sweep``)."""
    stopped = [{"id": t["id"], "name": t["name"], "status": t["status"], "message": t["message"]}
               for t in r["trials"] if t["status"] not in _OK]
    return {
        "id": r["id"], "name": r["name"], "status": r["status"], "message": r["message"],
        "objective": r["objective"], "counts": r["counts"], "spent_usd": r["spent"], "max_cost_usd": r["max_cost"],
        "spend_usd": r["spend"], "wasted_usd": r["spend"]["wasted"], "wasted_share": r["wasted_share"],
        "preemptions": sum(t["preemptions"] for t in r["trials"]), "best": r["best"],
        "trials": [{k: t[k] for k in ("id", "name", "status", "value", "params", "cost", "attempts", "preemptions",
                                      "runtime_s")} for t in r["trials"]],
        "stopped": stopped,
    }


def _sweep_lines(x: dict[str, Any], md: bool) -> list[str]:
    counts = ", ".join(f"{n} {st}" for st, n in sorted(x["counts"].items()))
    cap = f" of ${x['max_cost_usd']:.2f} cap" if x["max_cost_usd"] else ""
    metric = (x["objective"] or {}).get("metric")
    head = f"Sweep {x['name']} ({x['id']}) {x['status']}: {len(x['trials'])} trials, {counts}"
    lines = [f"### {head}" if md else head,
             f"Spent ${x['spent_usd']:.2f}{cap}; wasted ${x['wasted_usd']:.2f} ({100 * x['wasted_share']:.0f} %)",
             f"Preemptions survived: {x['preemptions']}"]
    if x["best"] is not None:
        lines.append(f"Best: {x['best']['name']} {metric}={_value(x['best']['value'])} {_params(x['best']['params'])}"
                     + (" (unfinished)" if x["best"]["unfinished"] else ""))
    header = ["#", "trial", "status", metric or "value", "cost", "preempted", "params"]
    rows = [[str(i + 1), f"{t['name']} ({t['id']})", t["status"], _value(t["value"]), f"${t['cost']:.2f}",
             str(t["preemptions"]), _params(t["params"])] for i, t in enumerate(x["trials"][:MAX_ROWS])]
    if md:
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                  for row in [header, *rows]]
    if len(x["trials"]) > MAX_ROWS:
        lines.append(f"... and {len(x['trials']) - MAX_ROWS} more trials (gpuorch sweep status {x['id']})")
    if x["stopped"]:
        lines.append("Why trials stopped:" if not md else "**Why trials stopped:**")
        lines += [f"- {t['name']} ({t['id']}) {t['status']}: {t['message'] or t['status']}" for t in x["stopped"]]
    return lines


def render(reports: list[dict[str, Any]], *, morning: bool = False) -> dict[str, Any]:
    """``{"title", "text", "markdown", "sweeps": [summary...]}`` of ``gpuorch sweep status``
    reports (``sweeps.report.sweep_report``, or the HTTP API's answer: the same keys). What
    ``sweep.finished`` sends and ``gpuorch sweep report`` prints."""
    found = [summary(r) for r in reports]
    names = ", ".join(x["name"] for x in found) or "no sweep ended"
    text: list[str] = []
    markdown: list[str] = []
    for x in found:
        text += [*_sweep_lines(x, False), ""]
        markdown += [*_sweep_lines(x, True), ""]
    return {"title": f"gpuorch morning report: {names}" if morning else f"gpuorch: {names}", "sweeps": found,
            "text": "\n".join(text).strip() or names, "markdown": "\n".join(markdown).strip() or names}


def morning_report(s: Session, sweeps: list[Sweep], now: datetime, since: datetime | None = None) -> dict[str, Any]:
    """``render`` of the sweeps' reports, and with ``since`` the whole installation's spend since
    then (``gpuorch cost --since``): ``spent_usd`` and a last line."""
    out = render([sweep_report(s, w, now) for w in sweeps], morning=since is not None)
    if since is not None:
        spent = cost_report(s, since, now, "sweep")
        line = f"Spent since {since:%Y-%m-%d %H:%M} UTC: ${spent['total']:.2f} (all jobs)"
        out["text"] = f"{out['text']}\n\n{line}" if out["sweeps"] else line
        out["markdown"] = f"{out['markdown']}\n\n{line}" if out["sweeps"] else line
        out["spent_usd"] = spent["total"]
    return out

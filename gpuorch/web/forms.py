"""The dashboard's action forms: cancel a job, stop a sweep, set a sweep's cap, resume a sweep.

Each is a ``POST`` to ``/ui/.../ACTION`` (``web.actions``) carrying the session's CSRF token, and
each sits inside a ``<details>``: the first click only opens it and shows what will happen, the
second (the button inside) does it. That is the confirmation, with no script and no dialog.
Forms are drawn only for a logged-in session (``csrf`` given): a request with the bearer token is
a script's, which posts to the same addresses itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from gpuorch.store.models import JobStatus
from gpuorch.sweeps.intent import RESUMABLE  # the trials a resume puts back in the queue

# What the page says after an action, keyed by the ``done`` query parameter of the redirect (a key,
# never text from the request: nothing a link could make the page say).
NOTICES = {
    "cancel": "Cancel requested: the daemon stops the job (and terminates its instance) at its next pass.",
    "cancel-listed": "Cancel requested: the daemon stops that job (and terminates its instance) at its next pass.",
    "sweep-cancel": "Sweep stopped: its unfinished trials are cancelled and their instances terminated.",
    "budget": "New cap stored: held and queued trials go on under it.",
    "resume": "Sweep resumed: its unfinished trials are queued again, those with a checkpoint first.",
}


def _form(action: str, csrf: str, label: str, confirm: str, fields: str = "", danger: bool = True,
          summary: str | None = None) -> str:
    """``summary``: the closed box's HTML (default: the label and an ellipsis)."""
    button = f'<button type=submit class="{"danger" if danger else "go"}">{escape(label)}</button>'
    return (f'<details class="action"><summary>{summary or escape(label) + "…"}</summary>'
            f'<form method=post action="{escape(action)}" class=confirm>'
            f'<input type=hidden name=csrf value="{escape(csrf)}">{fields}'
            f"<p class=hint>{escape(confirm)}</p>{button}</form></details>")


def _budget_field(required: bool, current: float | None) -> str:
    now = "no cap now" if current is None else f"now ${current:.2f}"
    # text, not type=number: the server checks the amount and names what is wrong with it
    return (f'<label for=budget>New cap in USD ({now}{"" if required else "; empty: keep it"})</label>'
            f'<input id=budget name=budget inputmode=decimal autocomplete=off{" required" if required else ""}>')


def job_actions(job: dict[str, Any], events: Sequence[dict[str, Any]], csrf: str | None) -> str:
    if csrf is None or JobStatus(job["status"]).terminal:
        return ""
    asked = [e for e in events if e["kind"] == "cancel_requested"]
    if asked:
        return (f'<p class="hint">Cancel requested at {asked[-1]["ts"]:%Y-%m-%d %H:%M:%S} UTC; '
                "the daemon is stopping it.</p>")
    return ('<div class=actions>' + _form(f"/ui/jobs/{job['id']}/cancel", csrf, f"Cancel job {job['id']}",
                                          "Stops the job and terminates its instance; a checkpoint it saved stays.")
            + "</div>")


def job_row_action(job: dict[str, Any], cancelling: bool, csrf: str | None) -> str:
    """The jobs list's cell for ``job``: a Cancel (confirmed, then back to the list), or what was asked."""
    if csrf is None or JobStatus(job["status"]).terminal:
        return ""
    if cancelling:
        return '<span class="hint">cancelling</span>'
    # on a phone the closed box is a bare ✕ (style.css), so the row fits the screen
    label = f"Cancel job {job['id']}"
    return _form(f"/ui/jobs/{job['id']}/cancel", csrf, label, f"Stops {job['name']} and terminates its instance; "
                 "a checkpoint it saved stays.", '<input type=hidden name=back value=jobs>',
                 summary=f'<span class=wide>Cancel…</span><span class=narrow aria-label="{escape(label)}" '
                         f'title="{escape(label)}">✕</span>')


def sweep_actions(sweep: dict[str, Any], csrf: str | None) -> str:
    if csrf is None:
        return ""
    base = f"/ui/sweeps/{quote(str(sweep['id']))}"
    out = []
    if sweep["status"] == "active":
        out.append(_form(f"{base}/budget", csrf, "Set the cap", "Held and queued trials go on under the new cap; "
                         "it cannot be below what the sweep has spent.", _budget_field(True, sweep["max_cost"]),
                         danger=False))
        out.append(_form(f"{base}/cancel", csrf, "Stop the sweep", "Cancels every unfinished trial and terminates "
                         "its instance; checkpoints stay, so the sweep can be resumed."))
    elif any(sweep["counts"].get(s.value) for s in RESUMABLE):
        out.append(_form(f"{base}/resume", csrf, "Resume the sweep", "Queues its unfinished trials again (those "
                         "with a checkpoint resume from it), optionally under a new cap.",
                         _budget_field(False, sweep["max_cost"]), danger=False))
    return '<div class=actions>' + "".join(out) + "</div>" if out else ""

"""The dashboard's actions over real HTTP, against the assembled daemon (conftest.py ``acting``):
each goes through ``JobService`` into the store and is recorded as an event; a request without
the session's CSRF token, from another site or without a session changes nothing; a bad budget
is one line naming the field. The same actions in Chromium: test_browser.py."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request

import pytest

from gpuorch.web import session

pytestmark = pytest.mark.timeout(300)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _open(url: str, *, data: dict | str | None = None, headers: dict | None = None):
    """(status, headers, body), redirects not followed; ``data`` a form (urlencoded here) or raw text."""
    body = None if data is None else (data if isinstance(data, str) else urllib.parse.urlencode(data)).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded",
                                                          **(headers or {})} if body is not None else headers or {})
    try:
        with urllib.request.build_opener(_NoRedirect).open(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


@pytest.fixture(scope="module")
def login(acting):
    """A session: its cookie header and the CSRF token its pages' forms carry."""
    status, headers, _ = _open(f"{acting['url']}/ui/login", data={"token": acting["token"], "next": "/ui/jobs"})
    assert status == 303
    cookie = headers["Set-Cookie"].split(";")[0]
    return {"Cookie": cookie}, session.csrf(acting["token"], cookie.split("=", 1)[1])


def _form_token(body: str) -> str:
    tokens = set(re.findall(r'name=csrf value="([0-9a-f]+)"', body))
    assert len(tokens) == 1, tokens  # every form of a page carries the session's one token
    return tokens.pop()


def _kinds(d, job_id=None) -> list[str]:
    return [e["kind"] for e in d.service.events(None if job_id is None else str(job_id), 500)]


def test_cancel_a_running_job_from_its_page_and_see_it_end(acting, login):
    d, (cookie, _) = acting["d"], login
    job = acting["running"]()
    status, _, page = _open(f"{acting['url']}/ui/jobs/{job}", headers=cookie)
    assert status == 200 and f'action="/ui/jobs/{job}/cancel"' in page
    csrf = _form_token(page)
    status, headers, _ = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={"csrf": csrf}, headers=cookie)
    assert status == 303 and headers["Location"] == f"/ui/jobs/{job}?done=cancel"
    assert d.job(job).cancel_requested and "cancel_requested" in _kinds(d, job)  # stored, and an event
    assert d.until_terminal(job, timeout_s=60).status.value == "cancelled"  # the daemon acts on it
    _, _, page = _open(f"{acting['url']}{headers['Location']}", headers=cookie)
    assert "Cancel requested" in page and "status-cancelled" in page
    assert f'action="/ui/jobs/{job}/cancel"' not in page  # nothing left to cancel


def test_cancel_a_running_job_from_the_jobs_list_and_come_back_to_it(acting, login):
    d, (cookie, _) = acting["d"], login
    job = acting["running"]()
    status, _, page = _open(f"{acting['url']}/ui/jobs", headers=cookie)
    assert status == 200 and f'action="/ui/jobs/{job}/cancel"' in page and '<td class="act">' in page
    csrf = _form_token(page)
    before = _kinds(d, job)
    status, _, body = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={"csrf": csrf, "back": "elsewhere"},
                            headers=cookie)
    assert status == 400 and "back: &#x27;elsewhere&#x27; is not a page to go back to" in body
    assert not d.job(job).cancel_requested and _kinds(d, job) == before  # refused: nothing changed
    status, headers, _ = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={"csrf": csrf, "back": "jobs"},
                               headers=cookie)
    assert status == 303 and headers["Location"] == "/ui/jobs?done=cancel-listed"
    assert d.job(job).cancel_requested
    _, _, page = _open(f"{acting['url']}{headers['Location']}", headers=cookie)
    assert "Cancel requested" in page and f'action="/ui/jobs/{job}/cancel"' not in page and "cancelling" in page
    _, _, page = _open(f"{acting['url']}/ui/jobs", headers={"Authorization": f"Bearer {acting['token']}"})
    assert "/cancel" not in page  # a script's request: no forms (it posts itself)
    assert d.until_terminal(job, timeout_s=60).status.value == "cancelled"


def test_an_action_without_the_sessions_csrf_token_changes_nothing(acting, login):
    d, (cookie, csrf) = acting["d"], login
    job = acting["running"]()
    before = _kinds(d)
    other = session.csrf(acting["token"], session.issue(acting["token"], 1_000.0))  # another session's
    for form, extra in (({}, {}), ({"csrf": ""}, {}), ({"csrf": other}, {}), ({"csrf": "x" * 64}, {}),
                        ({"csrf": csrf}, {"Origin": "http://evil.example"}),
                        ({"csrf": csrf}, {"Sec-Fetch-Site": "cross-site"})):
        status, _, body = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data=form, headers={**cookie, **extra})
        assert status == 403, (form, extra, body)
        line = re.search(r'<p class=error role=alert>([^<]*)</p>', body)
        assert line and line.group(1).split(":")[0] in ("csrf", "origin"), body
    status, _, body = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={"csrf": csrf})  # no session at all
    assert status == 403 and "session: not logged in" in body
    status, _, body = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={"csrf": csrf},
                            headers={"Authorization": "Bearer not-the-token-0123456789"})
    assert status == 401
    assert not d.job(job).cancel_requested and d.status(job).value == "running" and _kinds(d) == before


def test_a_script_acts_with_the_bearer_token_and_no_csrf(acting):
    d = acting["d"]
    job = acting["running"]()
    status, _, _ = _open(f"{acting['url']}/ui/jobs/{job}/cancel", data={},
                         headers={"Authorization": f"Bearer {acting['token']}"})
    assert status == 303 and d.job(job).cancel_requested


@pytest.mark.parametrize("budget", ["nan", "NaN", "-5", "0", "inf", "-inf", "1e400", "", "  ", "12 USD", "1e10",
                                    "0x10", "True", "$-1"])
def test_a_bad_budget_is_one_line_naming_the_field_and_nothing_changes(acting, login, budget):
    d, (cookie, csrf) = acting["d"], login
    sweep = acting.setdefault("budget_sweep", acting["sweep"]())
    before, events = d.sweep(sweep).max_cost, _kinds(d)
    status, _, body = _open(f"{acting['url']}/ui/sweeps/{sweep}/budget", data={"csrf": csrf, "budget": budget},
                            headers=cookie)
    assert status == 422, body
    (line,) = re.findall(r'<p class="error" role="alert">([^<]*)</p>', body)
    assert line.startswith("budget: ") and "give a positive amount in USD" in line and "\n" not in line
    assert 'name=budget' in body  # the sweep's page again, its form ready for a right value
    assert d.sweep(sweep).max_cost == before and _kinds(d) == events


def test_malformed_forms_are_refused_by_rule(acting, login):
    d, (cookie, csrf) = acting["d"], login
    sweep = acting.setdefault("budget_sweep", acting["sweep"]())
    url = f"{acting['url']}/ui/sweeps/{sweep}/budget"
    for raw, field in ((f"csrf={csrf}&budget=3&budget=4", "budget"), (f"csrf={csrf}&budget=3&admin=1", "form"),
                       (f"csrf={csrf}&budget=%ff", "form")):
        status, _, body = _open(url, data=raw, headers=cookie)
        assert status == 400 and f"<p class=error role=alert>{field}: " in body, (raw, body)
    status, _, body = _open(url, data=f"csrf={csrf}&budget=3", headers={**cookie, "Content-Type": "text/plain"})
    assert status == 415 and "Content-Type" in body
    status, _, body = _open(f"{acting['url']}/ui/sweeps/no-such-sweep/budget", data={"csrf": csrf, "budget": "3"},
                            headers=cookie)
    assert status == 404
    assert d.sweep(sweep).max_cost == 5.0


def test_raise_a_sweeps_cap_then_stop_and_resume_it(acting, login):
    d, (cookie, _) = acting["d"], login
    sweep = acting["sweep"]()
    _, _, page = _open(f"{acting['url']}/ui/sweeps/{sweep}", headers=cookie)
    csrf = _form_token(page)
    status, headers, _ = _open(f"{acting['url']}/ui/sweeps/{sweep}/budget", data={"csrf": csrf, "budget": "$12.5"},
                               headers=cookie)
    assert status == 303 and headers["Location"] == f"/ui/sweeps/{sweep}?done=budget"
    assert d.sweep(sweep).max_cost == 12.5 and "sweep_updated" in _kinds(d)
    _, _, page = _open(f"{acting['url']}{headers['Location']}", headers=cookie)
    assert "New cap stored" in page and "of $12.50" in page

    status, headers, _ = _open(f"{acting['url']}/ui/sweeps/{sweep}/cancel", data={"csrf": csrf}, headers=cookie)
    assert status == 303 and d.sweep(sweep).status.value == "cancelled" and "sweep_cancelled" in _kinds(d)
    _, _, page = _open(f"{acting['url']}/ui/sweeps/{sweep}", headers=cookie)
    assert f'action="/ui/sweeps/{sweep}/resume"' in page and f'action="/ui/sweeps/{sweep}/cancel"' not in page
    status, headers, _ = _open(f"{acting['url']}/ui/sweeps/{sweep}/resume", data={"csrf": csrf, "budget": ""},
                               headers=cookie)
    assert status == 303 and d.sweep(sweep).status.value == "active" and d.sweep(sweep).max_cost == 12.5
    assert "sweep_resumed" in _kinds(d)
    status, _, body = _open(f"{acting['url']}/ui/sweeps/{sweep}/resume", data={"csrf": csrf}, headers=cookie)
    assert status == 422 and "still active" in body  # the service's own refusal, one line
    d.service.sweep_cancel(str(sweep))  # its trials stop with the session's other sleepers


def test_the_daemon_page_shows_failing_and_dropped_notifications(acting, login):
    """The outbox's health (``notify.outbox.health``, as ``gpuorch doctor`` reads it) on the daemon
    page: rows as the sender leaves them, one dropped after its retries and one being retried."""
    from gpuorch.clock import utcnow
    from gpuorch.store.models import Notification, NotificationDelivery

    cookie, _ = login
    d = acting["d"]
    with d.store.write() as s:
        for uid, status, tries in (("evt-dead-<b>", "dead", 12), ("evt-retry", "pending", 3)):
            n = Notification(uid=uid, ts=utcnow(), type="job.failed", message="m", prepared=True, body="{}")
            s.add(n)
            s.flush()
            s.add(NotificationDelivery(notification_id=n.id, route="ops-hook", status=status, tries=tries,
                                       next_at=utcnow(), last_error="HTTP 500 from the receiver"))
    _, _, page = _open(f"{acting['url']}/ui/daemon", headers=cookie)
    section = page.split("<section id=notifications>")[1]
    assert "1 dead, 1 pending" in section and "1 failing, being retried" in section
    assert "<td>job.failed</td><td>ops-hook</td><td>12</td>" in section and "HTTP 500 from the receiver" in section
    assert "evt-dead-&lt;b&gt;" in section and "<b>" not in section

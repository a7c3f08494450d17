"""The dashboard over real HTTP (no browser): the login, the cookie, every page against a store
with real jobs and a sweep (conftest.py), and the refusals."""

from __future__ import annotations

import html
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from gpuorch.web import pages, session


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _open(url: str, *, data: dict | None = None, headers: dict | None = None):
    """(status, headers, body) without following redirects."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


@pytest.fixture(scope="module")
def cookie(scenario) -> str:
    status, headers, _ = _open(f"{scenario['url']}/ui/login", data={"token": scenario["token"], "next": "/ui/sweeps"})
    assert status == 303 and headers["Location"] == "/ui/sweeps"
    set_cookie = headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/ui" in set_cookie
    assert scenario["token"] not in set_cookie  # the cookie is a signature, not the token
    return set_cookie.split(";")[0]


def _page(scenario, cookie, path):
    status, headers, body = _open(f"{scenario['url']}{path}", headers={"Cookie": cookie})
    assert status == 200, body
    csp = headers["Content-Security-Policy"]
    # one script, from this server (live.js): nothing inline, nothing from elsewhere
    assert "default-src 'none'" in csp and "script-src 'self';" in csp and "unsafe" not in csp
    assert "<script>" not in body and body.count("<script") == 1 and 'src="/ui/static/live.js"' in body
    return body


def test_a_page_without_a_session_redirects_to_the_login_form(scenario):
    status, headers, _ = _open(f"{scenario['url']}/ui/jobs/1")
    assert status == 303 and headers["Location"] == "/ui/login?next=/ui/jobs/1"
    status, _, body = _open(f"{scenario['url']}/ui/login")
    assert status == 200 and 'type=password' in body


def test_a_wrong_token_is_refused_and_sets_no_cookie(scenario):
    status, headers, body = _open(f"{scenario['url']}/ui/login", data={"token": "not-the-token-at-all", "next": "/ui/"})
    assert status == 401 and headers.get("Set-Cookie") is None and "not accepted" in body
    status, _, _ = _open(f"{scenario['url']}/ui/jobs", headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert status == 401
    forged = session.issue("another-token-of-16+chars", time.time())  # signed with some other token
    status, headers, _ = _open(f"{scenario['url']}/ui/jobs", headers={"Cookie": f"{session.COOKIE}={forged}"})
    assert status == 303 and headers["Location"].startswith("/ui/login")


def test_the_login_never_redirects_off_the_dashboard(scenario):
    for target in ("https://evil.example/", "//evil.example/ui/", "/v1/jobs"):
        status, headers, _ = _open(f"{scenario['url']}/ui/login", data={"token": scenario["token"], "next": target})
        assert status == 303 and headers["Location"] == "/ui/jobs"


def test_the_api_bearer_token_opens_pages_too(scenario):
    status, _, body = _open(f"{scenario['url']}/ui/jobs", headers={"Authorization": f"Bearer {scenario['token']}"})
    assert status == 200 and "train" in body


def test_jobs_page_lists_the_jobs_and_says_a_daemon_passed(scenario, cookie):
    body = _page(scenario, cookie, "/ui/jobs")
    assert all(name in body for name in ("train", "lr-0", "lr-1", "lr-2"))
    assert 'class="banner"' not in body  # the scenario's daemon stamped its passes


def test_job_page_shows_the_attempt_timeline_events_and_log(scenario, cookie):
    body = _page(scenario, cookie, f"/ui/jobs/{scenario['train']}")
    spans = re.findall(r'<rect class="span" data-attempt="(\d+)" data-outcome="(\w+)"', body)
    assert spans == [("1", "preempted"), ("2", "succeeded")]
    assert "resuming from" in body  # the log tail of attempt 2
    assert re.search(r"<td>notice</td><td>preemption notice: ", body)  # the event of the preemption notice
    assert "spot" in body and "local-" in body  # market and zone in the attempt table


def test_sweep_page_plots_every_trial_and_the_spend_against_the_cap(scenario, cookie):
    body = _page(scenario, cookie, f"/ui/sweeps/{scenario['sweep']}")
    series = re.findall(r'<path class="series[^"]*" data-series="([^"]+)" d="([^"]+)"', body)
    names = [n for n, _ in series]
    assert sorted(names) == ["lr-0", "lr-1", "lr-2", "spent"]
    assert all(d.count("L") >= 10 for n, d in series if n != "spent")  # 150 steps, a loss every 10
    assert "cap $1.00" in body and 'class="cap"' in body


def test_costs_and_daemon_pages(scenario, cookie):
    body = _page(scenario, cookie, "/ui/costs")
    assert re.findall(r'<rect class="bar" data-label="local"', body)  # by provider
    assert 'data-label="lr"' in body and "daily cap $2.00" in body
    body = _page(scenario, cookie, "/ui/daemon")
    assert "<strong>alive</strong>" in body


def test_an_unknown_job_is_a_404_page(scenario, cookie):
    status, _, body = _open(f"{scenario['url']}/ui/jobs/9999", headers={"Cookie": cookie})
    assert status == 404 and "9999" in body


def test_store_values_are_escaped():
    html = pages.jobs_page({"daemon": None, "jobs": [{
        "id": 1, "name": "<script>alert(1)</script>", "status": "queued", "attempts": 0, "preemptions": 0,
        "where": None, "last_checkpoint": None, "cost": 0.0, "message": "<b>x</b>"}]})
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>x</b>" not in html


def test_a_session_expires_and_names_its_token():
    now = 1_000_000.0
    value = session.issue("the-token-0123456789", now)
    assert session.valid(value, "the-token-0123456789", now + 60)
    assert not session.valid(value, "the-token-0123456789", now + session.TTL_S + 1)
    assert not session.valid(value, "a-new-token-0123456789", now + 60)  # changing the token ends sessions
    assert not session.valid("garbage", "the-token-0123456789", now)


def test_the_jobs_page_shows_the_newest_jobs_first_and_says_when_it_cuts():
    job = {"status": "queued", "attempts": 0, "preemptions": 0, "where": None, "last_checkpoint": None, "cost": 0.0,
           "message": None}
    many = [{**job, "id": i, "name": f"job-{i}"} for i in range(1, pages.MAX_JOB_ROWS + 11)]
    html = pages.jobs_page({"daemon": None, "jobs": many})
    assert html.count('<a href="/ui/jobs/') == pages.MAX_JOB_ROWS
    assert html.index(f"job-{len(many)}<") < html.index(f"job-{len(many) - 1}<")  # newest first
    assert "job-10<" not in html and f"The newest {pages.MAX_JOB_ROWS} of {len(many)} jobs" in html


def test_the_api_guard_lets_the_dashboard_authenticate_itself_but_bounds_its_bodies(scenario):
    status, _, _ = _open(f"{scenario['url']}/v1/jobs")  # the API itself still wants its bearer token
    assert status == 401
    status, _, body = _open(f"{scenario['url']}/ui/login", data={"token": "x" * 20_000, "next": "/ui/"})
    assert status == 413 and "request body over" in body


def test_the_sweeps_list_shows_a_best_trial_ranked_by_its_result_file_value():
    from gpuorch.web.pages import sweeps_page

    best = {"name": "lr-2", "metrics": {"step": 200}, "value": 0.31, "step": 200.0, "unfinished": True}
    row = {"id": 1, "name": "lr", "status": "active", "counts": {"running": 1}, "spent": 0.5, "max_cost": 1.0,
           "deadline": None, "objective": {"metric": "accuracy", "mode": "max", "source": "result"}, "best": best}
    html = sweeps_page({"sweeps": [row], "daemon": None})
    assert "lr-2 accuracy=0.31 (unfinished, step 200)" in html  # no metrics['accuracy']: the value is the result's


def test_the_loss_plot_has_a_log_scale_and_marks_the_best_trial(scenario, cookie):
    from gpuorch.jobs.service import JobService

    report = JobService(scenario["store"], scenario["home"]).sweep(str(scenario["sweep"]))
    best = report["best"]["name"]
    for scale in ("log", "linear"):
        body = _page(scenario, cookie, f"/ui/sweeps/{scenario['sweep']}?scale={scale}")
        curves = body.split("<section id=curves>")[1].split("</section>")[0]
        assert f'data-scale="{scale}"' in curves and f"<strong>{scale}</strong>" in curves  # the chosen one
        assert len(re.findall(r'<path class="series[^"]*"', curves)) == 3
        assert re.search(rf'<path class="series best" data-series="{best}"', curves)  # thicker, on top
        assert re.search(rf'<circle class="best-marker" data-series="{best}"', curves)
        ticks = [float(t) for t in re.findall(r'class="tick">([-\d.e]+)</text>', curves.split("</svg>")[0])]
        if scale == "log":  # every y tick a 1, 2 or 5 times a power of ten
            ys = [t for t in ticks if t < 10]
            assert ys and all(f"{t:.0e}"[0] in "125" for t in ys), ys
    auto = _page(scenario, cookie, f"/ui/sweeps/{scenario['sweep']}")
    assert "auto (" in auto and '<a href="/ui/sweeps/' in auto
    assert f'<tr class="best"><td><a href="/ui/jobs/{report["best"]["id"]}">' in auto  # its row too


def test_an_unknown_scale_is_one_line_naming_the_parameter(scenario, cookie):
    status, _, body = _open(f"{scenario['url']}/ui/sweeps/{scenario['sweep']}?scale=cubic",
                            headers={"Cookie": cookie})
    assert status == 400
    (line,) = re.findall(r"<p class=error role=alert>([^<]*)</p>", body)
    assert html.unescape(line).startswith("scale: 'cubic' is not one of auto, log, linear")


def test_the_sweep_page_shows_the_clis_spend_split_runs_and_preemptions(scenario, cookie):
    from gpuorch.jobs.service import JobService

    report = JobService(scenario["store"], scenario["home"]).sweep(str(scenario["sweep"]))
    body = _page(scenario, cookie, f"/ui/sweeps/{scenario['sweep']}")
    split = body.split("<section id=spend>")[1]
    for k in ("finished", "pruned", "held", "wasted"):  # the CLI's footer always names these
        assert f"${report['spend'][k]:.4f} {k}" in split
    assert f"({report['wasted_share']:.0%} wasted)" in split
    runs = sum(t["runs"] for t in report["trials"])
    assert re.search(rf"<dd id=sweep-runs>{runs}( \(\d+ tries\))? runs</dd>", body)
    assert f"<dd id=sweep-preemptions>{sum(t['preemptions'] for t in report['trials'])}</dd>" in body
    assert "<th>PREEMPT</th>" in body and '<th class="opt">RUNTIME</th>' in body

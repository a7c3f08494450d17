"""The dashboard in a real browser: Debian's Chromium driven by Playwright, against the store with
real jobs and a sweep (conftest.py). Each page is loaded after logging in through the form; the
charts must be drawn (SVG elements with the expected series and a visible size). Screenshots are
kept as artifacts under build/test-artifacts/web/ (TEST_ARTIFACTS_DIR overrides); with
UPDATE_DOCS_SCREENSHOTS=1 the images README.md and docs/dashboard.md show (docs/images/dashboard-*.png)
are rewritten from them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("GPUORCH_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR", ROOT / "build" / "test-artifacts")) / "web"
DOCS = ROOT / "docs" / "images"
# From /work/shared/TESTING.md: without the background-networking flags Chromium keeps dialling out.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'")
expect = sync_api.expect
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing: `make deps` installs Debian's chromium", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, scenario, request):
    ctx = browser.new_context(viewport={"width": 1100, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()


def _login(page, scenario, path: str) -> None:
    page.goto(f"{scenario['url']}{path}")
    assert page.url.startswith(f"{scenario['url']}/ui/login")  # no session yet: the form
    page.fill("#token", scenario["token"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{scenario['url']}{path}")


def _shot(page, name: str, selector: str | None = None) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if selector:
        page.locator(selector).screenshot(path=str(path))
    else:
        page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def _drawn(locator) -> None:
    box = locator.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 20, box


def test_sweep_page_draws_every_trials_curve_and_the_spend(page, scenario):
    _login(page, scenario, f"/ui/sweeps/{scenario['sweep']}")
    curves = page.locator("#curves svg path.series")
    assert sorted(curves.evaluate_all("els => els.map(e => e.dataset.series)")) == ["lr-0", "lr-1", "lr-2"]
    lengths = curves.evaluate_all("els => els.map(e => e.getTotalLength())")
    assert all(n > 50 for n in lengths), lengths  # really drawn, not empty paths
    _drawn(page.locator("#curves svg"))
    assert page.locator("#spend svg path.series[data-series=spent]").count() == 1
    assert page.locator("#spend svg line.cap").count() == 1
    assert page.locator("#trials tbody tr").count() == 3
    shot = _shot(page, "sweep")
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS / "dashboard-sweep.png")


def test_job_page_draws_the_attempt_timeline(page, scenario):
    _login(page, scenario, f"/ui/jobs/{scenario['train']}")
    spans = page.locator("#timeline svg rect.span")
    assert spans.evaluate_all("els => els.map(e => e.dataset.outcome)") == ["preempted", "succeeded"]
    _drawn(page.locator("#timeline svg"))
    assert page.locator("#timeline table tbody tr").count() == 2
    assert "resuming from" in page.locator("pre.log").inner_text()
    shot = _shot(page, "job-timeline", "#timeline")
    _shot(page, "job")
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS / "dashboard-job-timeline.png")


def test_costs_jobs_sweeps_and_daemon_pages_render(page, scenario):
    _login(page, scenario, "/ui/costs")
    assert page.locator("#by-provider svg rect.bar").count() == 1
    assert page.locator("#by-day svg line.cap").count() == 1  # the daily cap
    _drawn(page.locator("#by-day svg"))
    _shot(page, "costs")
    page.click("nav >> text=Jobs")
    expect(page.locator("table.jobs tbody tr")).to_have_count(4)  # waits for the page the click opened
    _shot(page, "jobs")
    page.click("nav >> text=Sweeps")
    expect(page.locator("table.sweeps tbody tr")).to_have_count(1)
    page.click(f"table.sweeps a[href='/ui/sweeps/{scenario['sweep']}']")  # the list links to the sweep's page
    expect(page.locator("#curves svg path.series")).to_have_count(3)
    _shot(page, "sweeps")
    scenario["beat"]()
    page.click("nav >> text=Daemon")
    expect(page.locator(".daemon-alive")).to_have_count(1)
    _shot(page, "daemon")


def test_a_wrong_token_is_refused_in_the_browser(page, scenario):
    page.goto(f"{scenario['url']}/ui/jobs")
    page.fill("#token", "certainly-not-the-token")
    with page.expect_response(lambda r: r.url.endswith("/ui/login")) as resp:
        page.click("button[type=submit]")
    assert resp.value.status == 401
    assert "not accepted" in page.locator(".error").inner_text()
    assert page.context.cookies() == []
    page.goto(f"{scenario['url']}/ui/jobs")
    assert "/ui/login" in page.url  # still not let in


def test_pages_fit_a_phone(browser, scenario):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, device_scale_factor=2)
    page = ctx.new_page()
    try:
        _login(page, scenario, f"/ui/sweeps/{scenario['sweep']}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width  # nothing wider than the screen: tables scroll in their own box
        box = page.locator("#curves svg").bounding_box()
        assert box is not None and box["width"] <= 390
        _shot(page, "sweep-phone")
    finally:
        ctx.close()


def _unclipped(page, table: str) -> None:
    """Every column of ``table`` inside its box: nothing scrolled out of sight, nothing past the screen."""
    box = page.evaluate("""sel => { const t = document.querySelector(sel), s = t.closest('.scroll');
        const last = [...t.querySelectorAll('thead th')].filter(th => th.offsetParent !== null).pop();
        return {scroll: s.scrollWidth, client: s.clientWidth, right: last.getBoundingClientRect().right,
                box: s.getBoundingClientRect().right, page: document.documentElement.scrollWidth,
                screen: window.innerWidth}; }""", table)
    assert box["scroll"] <= box["client"] and box["right"] <= box["box"] + 0.5, box
    assert box["page"] <= box["screen"], box


def test_the_jobs_table_fits_1920_px_and_a_phone(browser, scenario):
    for size, mobile in (({"width": 1920, "height": 1080}, False), ({"width": 390, "height": 844}, True)):
        ctx = browser.new_context(viewport=size, is_mobile=mobile)
        page = ctx.new_page()
        try:
            _login(page, scenario, "/ui/jobs")
            expect(page.locator("table.jobs tbody tr")).to_have_count(4)
            _unclipped(page, "table.jobs")
            if not mobile:  # every column shown on a desktop; the checkpoint's long path wraps
                assert page.locator("table.jobs thead th:visible").count() == 10  # every job ended: no Cancel column
            else:  # the kind, like the preemptions, is hidden on a phone (`gpuorch status` shows it)
                assert page.locator("table.jobs thead th", has_text="KIND").is_hidden()
            _shot(page, f"jobs-{size['width']}")
        finally:
            ctx.close()


def test_the_loss_plot_on_a_log_axis_with_the_best_trial_marked(page, scenario):
    _login(page, scenario, f"/ui/sweeps/{scenario['sweep']}?scale=log")
    chart = page.locator("#curves svg")
    assert chart.get_attribute("data-scale") == "log"
    lengths = page.locator("#curves svg path.series").evaluate_all("els => els.map(e => e.getTotalLength())")
    assert len(lengths) == 3 and all(n > 50 for n in lengths), lengths
    ring = page.locator("#curves svg circle.best-marker")
    assert ring.count() == 1 and ring.bounding_box()["width"] > 4
    assert page.locator("#curves svg path.best").get_attribute("data-series") == ring.get_attribute("data-series")
    page.click("#curves .scale >> text=linear")  # the switch is a plain link
    expect(page.locator("#curves svg")).to_have_attribute("data-scale", "linear")
    _shot(page, "sweep-log", "#curves")


def test_cancel_a_running_job_from_the_page_and_watch_it_end_without_a_reload(browser, acting):
    d = acting["d"]
    job = acting["running"]()
    ctx = browser.new_context(viewport={"width": 1100, "height": 900})
    page = ctx.new_page()
    try:
        page.clock.install()  # the refresh timer runs when the test says (run_for), not by wall-clock luck
        _login(page, acting, f"/ui/jobs/{job}")
        expect(page.locator("#live-status")).to_contain_text("live")
        page.click(f"summary:has-text('Cancel job {job}')")  # the first click only shows what it will do
        assert not d.job(job).cancel_requested
        page.clock.run_for(11_000)
        expect(page.locator("#live-status")).to_contain_text("paused: a confirmation is open")
        page.click(f"button:has-text('Cancel job {job}')")
        expect(page.locator(".notice")).to_contain_text("Cancel requested")
        expect(page).to_have_url(f"{acting['url']}/ui/jobs/{job}")  # the notice's ?done=cancel dropped
        assert d.job(job).cancel_requested
        assert d.until_terminal(job, timeout_s=60).status.value == "cancelled"
        page.evaluate("window.stillThisPage = true")
        page.clock.run_for(11_000)  # the page refreshes its content in place
        expect(page.locator("dl.summary .status")).to_have_text("cancelled")
        assert page.evaluate("window.stillThisPage") is True  # no reload
        _shot(page, "job-cancelled")
    finally:
        ctx.close()


def test_raise_a_sweeps_cap_from_the_page_and_see_its_held_trial_resume(page, acting):
    """A bad amount is one line and changes nothing; a right one is stored, the held trial resumes
    (the assembled daemon's passes), and the page shows it running without a reload."""
    d = acting["d"]
    sweep, held = acting["held_sweep"]()
    cap = d.sweep(sweep).max_cost
    page.clock.install()  # the refresh timer runs when the test says (run_for)
    _login(page, acting, f"/ui/sweeps/{sweep}")
    row = page.locator(f"table.trials tr:has(a[href='/ui/jobs/{held}'])")
    expect(row.locator(".status")).to_have_text("held")
    page.click("summary:has-text('Set the cap')")
    page.fill("#budget", "NaN")
    with page.expect_response(lambda r: r.url.endswith("/budget")) as resp:
        page.click("button:has-text('Set the cap')")
    assert resp.value.status == 422
    expect(page.locator("p.error")).to_contain_text("budget: NaN is not a finite amount")
    assert d.sweep(sweep).max_cost == cap
    page.click("summary:has-text('Set the cap')")  # the form is on the refused page again
    page.fill("#budget", "7.5")
    page.click("button:has-text('Set the cap')")
    expect(page.locator(".notice")).to_contain_text("New cap stored")
    assert d.sweep(sweep).max_cost == 7.5
    expect(page.locator("dl.summary")).to_contain_text("of $7.50")
    d.until(lambda: d.status(held).value == "running" and len(d.attempts(held)) == 2, timeout_s=60,
            what="the held trial to resume")
    acting["beat"]()  # the daemon shown alive (its passes are the test's)
    page.evaluate("window.stillThisPage = true")
    page.clock.run_for(11_000)  # the page refreshes its content in place
    expect(row.locator(".status")).to_have_text("running")
    assert page.evaluate("window.stillThisPage") is True
    shot = _shot(page, "sweep-resumed")
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):
        shutil.copy(shot, DOCS / "dashboard-sweep-resumed.png")
    for width, height in ((1920, 1080), (390, 844)):  # the jobs list with its Cancel column fits both
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{acting['url']}/ui/jobs")
        expect(page.locator(f"table.jobs a[href='/ui/jobs/{held}']")).to_have_count(1)
        assert page.locator("table.jobs td.act summary").count() >= 2
        shot = _shot(page, f"jobs-acting-{width}")  # before the check: the picture of a failure too
        _unclipped(page, "table.jobs")
        if os.environ.get("UPDATE_DOCS_SCREENSHOTS"):
            shutil.copy(shot, DOCS / f"dashboard-jobs-{'phone' if width < 700 else 'desktop'}.png")
    d.service.sweep_cancel(str(sweep))


def test_a_forged_cross_site_form_is_refused_in_the_browser(page, acting):
    """A page of another origin posting to the dashboard: the browser withholds the SameSite=Strict
    cookie, and without it (or the CSRF token) nothing happens."""
    d = acting["d"]
    job = acting["running"]()
    _login(page, acting, f"/ui/jobs/{job}")
    evil = acting["url"].replace("127.0.0.1", "localhost")  # another site to the browser
    page.route(f"{evil}/forge", lambda route: route.fulfill(content_type="text/html", body=(
        f'<form id=f method=post action="{acting["url"]}/ui/jobs/{job}/cancel"></form>'
        '<button id=go form=f>win a prize</button>')))
    page.goto(f"{evil}/forge")
    with page.expect_response(lambda r: r.url.endswith("/cancel")) as resp:
        page.click("#go")
    assert resp.value.status == 403
    assert not d.job(job).cancel_requested and d.status(job).value == "running"

"""The dashboard in a real browser (Debian's headless Chromium through Selenium), against a running demo.

The demo runs as ``canary demo --keep`` runs it (the same pipeline, its dashboard
on a free loopback port as the read-only ``dashboard`` user) in a thread of its
own: the default demo this module shares with the other modules that only read
one (``default_demo``, ``tests/demo_run.py``); the browser is Debian's ``/usr/bin/chromium`` driven by
``/usr/bin/chromedriver`` (packages chromium and chromium-driver; ``.ci/run``
installs them).  Nothing downloads a browser: Selenium gets both paths and
``SE_OFFLINE``.  Every page is saved as a screenshot under ``tmp/artefacts/``
(``CANARY_ARTEFACTS`` elsewhere); ``CANARY_WRITE_DOCS=1`` also writes the fleet
live fleet page to ``docs/dashboard-fleet.png``, the documentation's image.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import urllib.parse
from pathlib import Path

import pytest

from reverie_canary.services.judge.replay import read_log
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.runtime.service import nats_connect
from tests import waits

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTEFACTS = Path(os.environ.get("CANARY_ARTEFACTS") or ROOT / "tmp" / "artefacts")
MODEL = "deepseek/deepseek-chat-v3.1"
#: Two suspensions the default scenario makes (lambda: slow first token; baseten: broken JSON).
SUSPENDED = ("lambda/fp8", "baseten/fp8")


def _browser_or_skip() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = (f"{', '.join(missing)} not installed (Debian packages chromium and chromium-driver; "
                   ".ci/run installs them)")
        if os.environ.get("CANARY_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def demo(default_demo):
    _browser_or_skip()
    running = default_demo
    # two failed cycles suspend each of SUSPENDED; on a loaded machine a cycle can lose its probes
    for n in range(4, 12):
        assert running.call(running.p.wait_cycles(n), timeout_s=90), "the demo stopped closing cycles"
        if set(SUSPENDED) <= set(running.call(running.p.summary())["ignore"]):
            break
    return running


@pytest.fixture(scope="module")
def browser(demo):
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never look for a browser to download
    os.environ.setdefault("SE_AVOID_STATS", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    try:
        log_in(driver, demo)
        yield driver
    finally:
        driver.quit()


def log_in(driver, demo) -> None:
    """Sign in as the demo's reader the way a person does: the URL with the user and password once, then plain
    URLs (the browser keeps the credentials for the origin: pages, fetch and the event stream use them)."""
    login = demo.p.dashboard_login
    parts = urllib.parse.urlsplit(demo.p.dashboard_url)
    secret = urllib.parse.quote(login.password, safe="")
    driver.get(parts._replace(netloc=f"{login.user}:{secret}@{parts.netloc}").geturl())
    # then the plain URL: a page opened with credentials in its URL may not fetch() relative URLs (Fetch standard)
    driver.get(demo.p.dashboard_url)
    assert "data-provider" in driver.page_source, driver.page_source[:300]


def test_without_credentials_the_browser_gets_no_page(demo):
    """A fresh browser that gives no password sees no provider anywhere; with the URL's user, the page and its fetch."""
    os.environ.setdefault("SE_OFFLINE", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    try:
        for path in ("/", "/api/v1/quality", "/provider?model=x&provider=y"):
            driver.get(url(demo, path))  # headless Chromium cancels the password prompt: an empty page
            source = driver.page_source
            assert "deepinfra" not in source and "data-provider" not in source, (path, source[:300])
        log_in(driver, demo)
        assert driver.find_elements("css selector", 'tr[data-provider="deepinfra/fp8"]')
        feed = driver.execute_async_script("""const done = arguments[0];
            fetch('/api/v1/quality').then(r => r.json().then(b => done([r.status, b.models.length])))
              .catch(e => done(String(e)));""")
        assert feed == [200, 1], feed  # the same origin's fetch carries the credentials
    finally:
        driver.quit()


def url(demo, path: str, **query: str) -> str:
    return demo.p.dashboard_url.rstrip("/") + path + (("?" + urllib.parse.urlencode(query)) if query else "")


def screenshot(driver, name: str) -> Path:
    """Save the page (its whole height) as ``<ARTEFACTS>/<name>.png``."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 4000)")
    driver.set_window_size(1400, max(700, height))
    path = ARTEFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path


CELLS_JS = """return Array.from(document.querySelectorAll('section.model td.cell')).map(c =>
    [c.closest('tr').dataset.provider, Number(c.dataset.cycleNo),
     Array.from(c.classList).find(k => k.startsWith('v-')).slice(2), c.textContent, c.getAttribute('aria-label'),
     c.getAttribute('title'), c.tabIndex]);"""


def expected_cells(summary) -> dict[tuple[str, int], str]:
    """(provider, cycle no) -> verdict, from the demo's summary (its observer saw every verdict in order)."""
    numbers = [c["cycle_no"] for c in summary["probes"]]
    out = {}
    for provider, info in summary["providers"].items():
        assert len(info["verdicts"]) == len(numbers), (provider, info["verdicts"], numbers)
        out.update({(provider, n): v for n, v in zip(numbers, info["verdicts"], strict=False)})
    return out


def test_the_fleet_matrix_shows_every_provider_and_cycle_with_the_verdicts_of_the_demo_summary(demo, browser):
    """One row per provider, one lettered cell per closed cycle, each the summary's verdict; the label says why."""
    browser.get(url(demo, "/", live="0"))
    cells = browser.execute_script(CELLS_JS)
    summary = demo.call(demo.p.summary())
    screenshot(browser, "fleet")
    want = expected_cells(summary)
    seen = {(p, n): (verdict, letter, label, title, tab) for p, n, verdict, letter, label, title, tab in cells}
    shown = max(n for _, n in seen)
    assert {p for p, _ in seen} == set(summary["providers"])
    assert set(seen) <= set(want), set(seen) - set(want)  # every column is a cycle of the demo
    due = {key for key in want if key[1] <= shown}  # closed before the page was read
    assert due <= set(seen), sorted(due - set(seen))
    assert len({n for _, n in due}) >= 4
    letters = {"passed": "P", "failed": "F", "frozen": "Z", "blind": "B", "not_probed": "N"}
    for key in due:
        verdict, letter, label, title, tab = seen[key]
        assert verdict == want[key], (key, verdict, want[key])
        assert letter == letters[verdict] and tab == 0
        assert title == (None if verdict == "passed" else label)  # hover text wherever there is something to say
        assert label.startswith(f"{key[0]}, cycle #{key[1]}: {verdict.replace('_', ' ')}")
    slow = [seen[k] for k in due if k[0] == "lambda/fp8" and want[k] == "failed"]
    assert slow and all("failing kinds:" in s[2] and "ttft_exceeded" in s[2] for s in slow)
    broken = [seen[k] for k in due if k[0] == "baseten/fp8" and want[k] == "failed"]
    assert broken and all("structured" in s[2] for s in broken)
    states = dict(browser.execute_script(
        "return Array.from(document.querySelectorAll('tr[data-state]')).map(r => [r.dataset.provider, r.dataset.state]);"))
    for provider in set(summary["ignore"]) - set(summary["excluded"]):  # the excluded control is no row
        assert states[provider] == "suspended", (provider, states[provider])
    page = browser.find_element("css selector", "section.model").text
    assert f"v{summary['snapshot_version']}" in page or "ignore list v" in page
    # each row shows the quantization the listing declares (every endpoint of the default scenario is fp8)
    quants = dict(browser.execute_script(
        "return Array.from(document.querySelectorAll('tr[data-state]')).map(r => [r.dataset.provider, "
        "(r.querySelector('th .quant') || {}).textContent || null]);"))
    assert quants == dict.fromkeys(summary["providers"], "fp8"), quants


LAYOUT_JS = """const scroll = document.querySelector('section.model .scroll');
    const box = scroll.getBoundingClientRect();
    const heads = Array.from(document.querySelectorAll('table.matrix thead th.cyc')).filter(
        h => !h.closest('table.controls'));
    const visible = h => { const r = h.getBoundingClientRect(); return r.left >= box.left && r.right <= box.right; };
    const line = parseFloat(getComputedStyle(document.querySelector('table.matrix thead th')).lineHeight) || 20;
    return {order: heads.map(h => Number(h.title.match(/#(\\d+)/)[1])),
            visible: heads.filter(visible).map(h => Number(h.title.match(/#(\\d+)/)[1])),
            controls: Array.from(document.querySelectorAll('table.controls thead th.cyc')).map(
                h => Number(h.title.match(/#(\\d+)/)[1])),
            scrollLeft: scroll.scrollLeft,
            wrapped: Array.from(document.querySelectorAll('table.matrix thead th, table.list thead th')).filter(
                h => h.getBoundingClientRect().height > 1.6 * line).map(h => h.textContent.trim())};"""


@pytest.mark.parametrize("width", [1280, 1600])
def test_the_fleet_matrix_opens_on_the_newest_cycles_with_headers_on_one_line(demo, browser, width):
    """At 1280 and 1600 px: the cycles newest first, the newest in view without scrolling, the controls' columns in
    the same order, and no header of the matrix or the ignore list wrapped onto a second line."""
    browser.set_window_size(width, 1000)
    try:
        browser.get(url(demo, "/", live="0"))
        layout = browser.execute_script(LAYOUT_JS)
        screenshot_at = ARTEFACTS / f"fleet-{width}.png"
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(screenshot_at))
    finally:
        browser.set_window_size(1400, 1000)
    order = layout["order"]
    assert len(order) >= 4 and order == sorted(order, reverse=True), order
    assert layout["scrollLeft"] == 0 and order[0] in layout["visible"], layout
    assert layout["controls"] == order
    assert layout["wrapped"] == [], layout["wrapped"]


def test_the_positive_controls_show_each_kind_per_cycle_as_the_feed_has_them(demo, browser):
    """One row per control kind under the matrix, one lettered cell per column: failed as it should, passed (the
    probe too weak) or not probed; the same last result and count as the quality feed."""
    import httpx

    browser.get(url(demo, "/", live="0"))
    rows = browser.execute_script("""return Array.from(document.querySelectorAll('table.controls tbody tr')).map(r =>
        [r.dataset.kind, r.dataset.control, r.dataset.last, Number(r.dataset.withoutFailure),
         Array.from(r.querySelectorAll('td.ccell')).map(c => [Number(c.dataset.cycleNo), c.textContent,
           Array.from(c.classList).find(k => k.startsWith('c-')), c.getAttribute('aria-label')])]);""")
    columns = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.controls thead th.cyc')).length;")
    matrix_columns = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.matrix:not(.controls) thead th.cyc')).length;")
    screenshot(browser, "fleet-controls")
    login = demo.p.dashboard_login
    feed = httpx.get(url(demo, "/api/v1/quality"), auth=(login.user, login.password), timeout=30).json()
    (control,) = [c for c in feed["models"][0]["controls"] if c["kind"] == "refusal"]
    (row,) = [r for r in rows if r[0] == "refusal"]
    kind, provider, last, without, cells = row
    assert provider == "control-filter/strict" and columns == matrix_columns == len(cells) and len(cells) >= 3
    letters = {"c-failed": "F", "c-passed": "P", "c-not_probed": "N"}
    for number, letter, cls, label in cells:
        assert letters[cls] == letter and label.startswith(f"refusal control (control-filter/strict), cycle #{number}")
    # each cell is what the log says of the control's probe in that cycle (a loaded machine loses some to the
    # short demo cycles' deadlines: those are not probed, never passed)
    logged = demo.call(control_results(demo))
    for number, _, cls, _ in cells:
        outcomes = logged.get(number, [])
        want = "passed" if "pass" in outcomes else "failed" if "fail" in outcomes else "not_probed"
        assert cls == f"c-{want}", (number, cls, outcomes)
    if (control["last_cycle_no"], control["last"]) == (cells[0][0], last):  # no cycle closed between the reads
        assert without == control["cycles_without_failure"]


async def control_results(demo) -> dict[int, list[str]]:
    """Cycle number -> the outcomes of the refusal control's probes the log holds (planned, answered or not)."""
    from reverie_canary.shared.contract.events import EndpointsDiscovered, ProbeResult

    nc = await nats_connect(demo.p.settings)
    try:
        events = [e.event for e in await read_log(nc.jetstream(), judge_only=False)]
    finally:
        await nc.close()
    planned = {t.task_id: e.cycle_no for e in events if isinstance(e, EndpointsDiscovered) for t in e.planned
               if t.control and t.kind == "refusal"}
    out: dict[int, list[str]] = {n: [] for n in planned.values()}
    for e in events:
        if isinstance(e, ProbeResult) and e.task_id in planned:
            out[planned[e.task_id]].append(e.outcome)
    return out


def test_a_new_cycle_appears_without_a_reload(demo, browser):
    """The server-sent event of a closed cycle swaps the model's matrix in place: a new column, the same page."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url(demo, "/"))
    WebDriverWait(browser, 15).until(lambda d: d.find_element("id", "live").text == "live")
    browser.execute_script("window.__notReloaded = 'same page';")
    before = browser.execute_script(
        "return Math.max(...Array.from(document.querySelectorAll('td.cell')).map(c => Number(c.dataset.cycleNo)));")
    WebDriverWait(browser, 40, poll_frequency=0.25).until(lambda d: d.execute_script(
        "return Math.max(...Array.from(document.querySelectorAll('td.cell')).map(c => Number(c.dataset.cycleNo)));")
        > before)
    assert browser.execute_script("return window.__notReloaded;") == "same page"
    assert browser.find_elements("css selector", "section.model.fresh")  # swapped in by the live update
    path = screenshot(browser, "fleet-live")
    if os.environ.get("CANARY_WRITE_DOCS"):  # the documentation's image: the live fleet page
        shutil.copyfile(path, ROOT / "docs" / "dashboard-fleet.png")


def test_keyboard_navigation_reaches_every_cell(demo, browser):
    """Tab walks through every cell of the matrix in reading order; the arrow keys move between neighbours."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(url(demo, "/", live="0", cycles="12"))
    cells = browser.execute_script(CELLS_JS)
    rows = len({c[0] for c in cells})
    browser.execute_script("""window.__focused = [];
        document.addEventListener('focusin', e => { const t = e.target;
          if (t.classList.contains('cell'))
            window.__focused.push([t.closest('tr').dataset.provider, Number(t.dataset.cycleNo)]); });
        document.querySelector('section.model a').focus();""")  # the first row's link, just before its cells
    ActionChains(browser).send_keys(Keys.TAB * (len(cells) + rows + 2)).perform()
    focused = [tuple(x) for x in browser.execute_script("return window.__focused;")]
    assert focused == [(c[0], c[1]) for c in cells]
    first = browser.find_element("css selector", "section.model td.cell")
    first.click()
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT, Keys.ARROW_DOWN).perform()
    now = browser.execute_script("const a = document.activeElement; return [a.closest('tr').dataset.provider, "
                                 "Number(a.dataset.cycleNo)];")
    by_row = {}
    for provider, number, *_ in cells:
        by_row.setdefault(provider, []).append(number)
    providers = list(by_row)
    assert tuple(now) == (providers[1], by_row[providers[1]][1])


def suspended(demo):
    """A provider with an enforced suspension in the judge's record, and that suspension."""
    record = demo.call(demo.p.judge_record())
    held = {n: ps.suspension for n, ps in record.state.providers.items()
            if ps.suspension is not None and ps.suspension.enforced}
    name = next(p for p in SUSPENDED if p in held)
    return name, held[name]


def test_the_provider_page_of_a_suspended_provider_shows_the_failed_probes_behind_its_suspension(demo, browser):
    """Each cycle the suspension rests on has its failed probes on the page, with the reply and the evidence."""
    name, suspension = suspended(demo)
    rows_js = """return Array.from(document.querySelectorAll(
        'table[data-section=behind] tr.failure')).map(r => [r.dataset.cycle, r.dataset.kind,
        r.querySelector('td:nth-child(4)').textContent, r.querySelector('pre.excerpt') !== null]);"""
    seen: list = []

    def page_shows_every_cycle() -> bool:
        browser.get(url(demo, "/provider", model=MODEL, provider=name))
        seen[:] = [browser.find_element("id", "state").text, browser.execute_script(rows_js)]
        return {cycle for cycle, _, outcome, _ in seen[1] if outcome == "fail"} == set(suspension.cycles)

    # the dashboard follows the log every 0.5 s: the last cycle's results may reach it after the judge's decision
    with contextlib.suppress(waits.WaitTimeout):
        waits.until_sync(page_shows_every_cycle, timeout_s=15, interval_s=0.5,
                         what=f"the failed probes of {suspension.cycles} on the provider page")
    state, rows = seen
    screenshot(browser, "provider")
    assert state.startswith("suspended"), (name, state, suspension)
    assert {cycle for cycle, *_ in rows} == set(suspension.cycles), (name, rows, suspension, suspended(demo))
    # every probe that did not pass in those cycles is listed (a transport error beside the failures too), and
    # each cycle has the quality failure that made it a failed cycle
    assert all(outcome != "pass" and has_reply for _, _, outcome, has_reply in rows), rows
    assert {cycle for cycle, _, outcome, _ in rows if outcome == "fail"} == set(suspension.cycles), rows
    ladder = browser.find_element("id", "ladder").text
    assert "suspend" in ladder and "enforce" in ladder


def test_the_look_back_inside_a_suspension_names_that_provider_as_ignored_with_the_snapshot_version(demo, browser):
    """The form, filled as a support person would: the suspended provider reads ignored, with the version in force."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    name, suspension = suspended(demo)

    async def snapshots() -> list[IgnoreSnapshot]:
        nc = await nats_connect(demo.p.settings)
        try:
            return [e.event for e in await read_log(nc.jetstream(), judge_only=False)
                    if isinstance(e.event, IgnoreSnapshot)]
        finally:
            await nc.close()

    logged = sorted(demo.call(snapshots()), key=lambda s: s.version)
    first = next(s for s in logged if name in s.ignore_at(s.at) and s.at >= suspension.since)
    at = first.at.replace(microsecond=0) + (first.at - first.at.replace(microsecond=0)).__class__(seconds=1)
    assert at < suspension.until
    version = max(s.version for s in logged if s.at <= at)
    browser.get(url(demo, "/lookback"))
    Select(browser.find_element(By.NAME, "model")).select_by_visible_text(MODEL)
    browser.find_element(By.NAME, "at").send_keys(at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    window = browser.find_element(By.NAME, "window")
    window.clear()
    window.send_keys("1m")
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    # the click only starts the navigation (WebDriver does not wait for a form's submission): wait, bounded,
    # for the answer or for the page's problem line, and fail with that line's text
    WebDriverWait(browser, 30, poll_frequency=0.2).until(
        lambda d: d.find_elements(By.ID, "answer") or d.find_elements(By.CSS_SELECTOR, "p.problem[role=alert]"))
    problem = browser.find_elements(By.CSS_SELECTOR, "p.problem[role=alert]")
    assert not problem, problem[0].text
    answer = browser.find_element(By.ID, "answer")
    screenshot(browser, "lookback")
    assert answer.get_attribute("data-snapshot-version") == str(version)
    assert browser.find_element(By.ID, "snapshot").text == f"v{version}"
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-provider="{name}"]')
    assert row.get_attribute("data-routing") == "ignored" and "suspension" in row.text
    healthy = browser.find_element(By.CSS_SELECTOR, 'tr[data-provider="deepinfra/fp8"]')
    assert healthy.get_attribute("data-routing") == "eligible"


def test_the_notices_page_lists_what_operators_were_told_newest_first(demo, browser):
    """The notifier's delivery book: the demo's signed webhook deliveries, the suspensions among them."""
    browser.get(url(demo, "/notices"))
    screenshot(browser, "notices")
    rows = browser.execute_script("""return Array.from(document.querySelectorAll('#notices tbody tr')).map(r =>
        Array.from(r.cells).map(c => c.textContent));""")
    assert len(rows) >= len(SUSPENDED), rows
    assert any(row[4] == "suspend" and row[6] in SUSPENDED for row in rows), rows
    stamps = [row[0] for row in rows]
    assert stamps == sorted(stamps, reverse=True)

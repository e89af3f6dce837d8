"""The built book in a real headless browser: offline, no console errors, math typeset, and every
interactive output moves with no kernel.

Builds the book (scripts/build_book.py, which reuses a build of the same inputs made earlier in the
same `make test` run), serves _build/html on 127.0.0.1 with a throwaway HTTP server and opens
every page of _toc.yml in headless Chromium (selenium + /usr/bin/chromedriver).

Screenshots go to artifacts/screenshots/ (git-ignored). ATTNLIB_BOOK_TOC=/path/toc.yml tests the
pipeline on another table of contents.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import build_book  # noqa: E402

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("ATTNLIB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ATTNLIB_CHROMEDRIVER", "/usr/bin/chromedriver")
TOC = Path(os.environ.get("ATTNLIB_BOOK_TOC", ROOT / "_toc.yml"))
SHOTS = ROOT / "artifacts" / "screenshots"
# URL schemes that are not network requests (the browser's own pages, inline data)
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-extension", "devtools", "chrome-untrusted"}
NUMBER = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")

PAGES = build_book.toc_docnames(TOC)


# ---------------------------------------------------------------------------------------------
# fixtures: the build, a server, a browser


@pytest.fixture(scope="module")
def html_dir() -> Path:
    rc = build_book.build(TOC, quiet=True)
    assert rc == 0, f"the book build failed (exit {rc}); run `python scripts/build_book.py` to see why"
    return build_book.HTML


@pytest.fixture(scope="module")
def server(html_dir):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(html_dir))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def driver():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"{missing} not found: `make test` installs them "
                    "(apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="attnlib-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1400", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(90)
    drv.set_script_timeout(60)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# helpers


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.1):
    """Poll ``predicate`` until it returns something truthy; return it (or the last falsy value)."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


def requested_urls(drv) -> list[str]:
    urls = []
    for entry in drv.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
        elif msg["method"] == "Network.webSocketCreated":
            urls.append(msg["params"]["url"])
    return urls


def off_host(urls: list[str], host: str) -> list[str]:
    bad = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme in LOCAL_SCHEMES:
            continue
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc == host:
            continue
        bad.append(url)
    return bad


def shot(target, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    try:
        target.screenshot(str(SHOTS / f"{safe}.png")) if hasattr(target, "screenshot") else None
    except Exception:  # an element outside the viewport or zero-sized: the page shot still exists
        pass


def page_shot(drv, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(SHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"))


JS_WIDGETS_PENDING = """
return Array.from(document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]'))
  .filter(s => !Array.from(s.parentElement.children).some(c => c.tagName !== 'SCRIPT'))
  .map(s => { try { return JSON.parse(s.textContent).model_id; } catch (e) { return '?'; } });
"""

JS_MATHJAX_READY = """
const done = arguments[arguments.length - 1];
const mj = window.MathJax;
if (!mj || !mj.startup || !mj.startup.promise) { done('no-mathjax'); return; }
mj.startup.promise.then(() => done('ready'), (err) => done('error: ' + err));
"""

JS_PROSE_TEXT = """
const main = document.querySelector('main') || document.body;
const clone = main.cloneNode(true);
clone.querySelectorAll('pre, code, script, style, textarea, mjx-container, mjx-assistive-mml, .highlight')
  .forEach(e => e.remove());
return clone.textContent;
"""

JS_UNTYPESET_MATH = """
return Array.from(document.querySelectorAll('span.math, div.math'))
  .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80));
"""

JS_WIDGET_DOLLARS = """
return Array.from(document.querySelectorAll('.widget-label, .widget-html-content, .widget-label-basic'))
  .map(e => e.textContent).filter(t => /\\$[^$\\s][^$]*\\$/.test(t));
"""

# What a reader sees in a widget area, leaving out the slider itself (its readout always moves).
JS_VISIBLE_CONTENT = """
const root = arguments[0];
const visible = e => e.getClientRects().length > 0;
const parts = [];
root.querySelectorAll('.jp-OutputArea-output, .widget-html-content, img, svg, canvas, .widget-label')
  .forEach(e => {
    if (e.closest('.widget-slider') || !visible(e)) return;
    if (e.tagName === 'IMG') parts.push('img:' + e.src.length + ':' + e.src.slice(-80));
    else if (e.tagName.toLowerCase() === 'svg') parts.push('svg:' + e.outerHTML.length + ':' + e.outerHTML.slice(-200));
    else parts.push(e.innerText);
  });
return parts.join('\\n');
"""


def load(drv, server: str, docname: str):
    """Open a page, wait for MathJax and the widgets; return (urls requested, console errors)."""
    drv.get_log("performance"), drv.get_log("browser")  # drop what earlier pages logged
    drv.get(f"http://{server}/{docname}.html")
    wait_for(lambda: drv.execute_script("return document.readyState") == "complete")
    state = drv.execute_async_script(JS_MATHJAX_READY)
    assert not state.startswith("error"), f"{docname}: MathJax failed to start: {state}"
    pending = wait_for(lambda: not drv.execute_script(JS_WIDGETS_PENDING), timeout=30)
    assert pending, (f"{docname}: widget views never rendered: "
                     f"{drv.execute_script(JS_WIDGETS_PENDING)} (is the widget state stored?)")
    # widget labels are typeset after the widgets render
    wait_for(lambda: not drv.execute_script(JS_WIDGET_DOLLARS), timeout=10)
    time.sleep(0.5)  # late requests (fonts) and console messages
    return requested_urls(drv), drv.get_log("browser")


def numbers_in(text: str) -> list[str]:
    return NUMBER.findall(text)


def close_to(tooltip_text: str, value: float) -> bool:
    """Is some number printed in the tooltip equal to ``value`` at the precision it is printed?"""
    for token in numbers_in(tooltip_text):
        decimals = len(token.split(".")[1]) if "." in token else 0
        if abs(float(token) - value) <= 0.5 * 10 ** (-decimals) + 1e-9:
            return True
    return False


# ---------------------------------------------------------------------------------------------
# the tests: each page is loaded once (a module-scoped parametrized fixture makes pytest run all
# the tests of one page together), then checked in the order below; the explorer test, which
# changes the page, comes last.


@pytest.fixture(scope="module", params=PAGES)
def page(request, driver, server):
    docname = request.param
    urls, console = load(driver, server, docname)
    page_shot(driver, f"{docname}__page")
    return docname, urls, console


def test_page_offline_and_clean(page, server):
    docname, urls, console = page
    assert any(urlsplit(u).path.endswith(f"/{docname}.html") for u in urls), "the page did not load"
    bad = off_host(urls, server)
    assert not bad, f"{docname}: requests left the book's host: {bad[:10]}"
    severe = [e["message"] for e in console if e["level"] == "SEVERE"]
    assert not severe, f"{docname}: console errors: {severe}"


def test_page_math_typeset(driver, page):
    docname = page[0]
    prose = driver.execute_script(JS_PROSE_TEXT)
    for raw in ("$$", "\\(", "\\)", "\\[", "\\]", "\\begin{"):
        assert raw not in prose, f"{docname}: raw math delimiter {raw!r} left in the visible text"
    untypeset = wait_for(lambda: not driver.execute_script(JS_UNTYPESET_MATH), timeout=15)
    assert untypeset, f"{docname}: math not typeset: {driver.execute_script(JS_UNTYPESET_MATH)}"
    dollars = driver.execute_script(JS_WIDGET_DOLLARS)
    assert not dollars, f"{docname}: widget labels with untypeset $...$: {dollars}"


def test_page_widget_sliders_move(driver, page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    docname = page[0]
    sliders = driver.find_elements(By.CSS_SELECTOR, ".widget-subarea .widget-slider")
    for k, slider in enumerate(sliders):
        label = f"{docname}__slider{k}"
        root = driver.execute_script("return arguments[0].closest('.widget-subarea');", slider)
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
        before = driver.execute_script(JS_VISIBLE_CONTENT, root)
        shot(root, f"{label}_before")
        handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
        value = handle.get_attribute("aria-valuenow")
        driver.execute_script("arguments[0].focus();", handle)
        handle.send_keys(Keys.ARROW_RIGHT)
        if handle.get_attribute("aria-valuenow") == value:
            handle.send_keys(Keys.ARROW_LEFT)
        assert handle.get_attribute("aria-valuenow") != value, f"{label}: the slider did not move"
        after = wait_for(lambda: (c := driver.execute_script(JS_VISIBLE_CONTENT, root)) != before and c,
                         timeout=5)
        shot(root, f"{label}_after")
        assert after, (f"{label}: moving the slider ({value} -> {handle.get_attribute('aria-valuenow')}) "
                       "changed nothing visible; is it linked client-side (viz.precomputed_slider)?")


def _explorer_snapshot(drv, ex):
    return drv.execute_script(
        "const ex = arguments[0]; const svg = ex.querySelector('svg.attnlib-plot');"
        "return [ex.getAttribute('data-state'), svg ? svg.outerHTML : null];", ex)


def _move(drv, control) -> str:
    """Operate one control like a reader would; return what was done."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    tag = control.tag_name.lower()
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'});", control)
    if tag == "input":  # range: keyboard, as the DOM contract promises
        before = control.get_attribute("value")
        drv.execute_script("arguments[0].focus();", control)
        control.send_keys(Keys.ARROW_RIGHT)
        if control.get_attribute("value") == before:
            control.send_keys(Keys.ARROW_LEFT)
        return f"range {before} -> {control.get_attribute('value')}"
    if tag == "select":
        sel = Select(control)
        n = len(sel.options)
        current = next(i for i, o in enumerate(sel.options) if o.is_selected())
        sel.select_by_index((current + 1) % n)
        return f"select {current} -> {(current + 1) % n} of {n}"
    ActionChains(drv).move_to_element(control).click().perform()
    return f"button {control.text!r}"


def test_page_explorers_move(driver, page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    docname = page[0]
    explorers = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-explorer")
    for k, ex in enumerate(explorers):
        label = f"{docname}__explorer{k}"
        if not ex.is_displayed():  # e.g. in a Stack page that is not selected; tested when shown
            continue
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", ex)
        shot(ex, f"{label}_before")
        assert ex.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot"), f"{label}: no svg.attnlib-plot"

        def operate(control, j):
            before = _explorer_snapshot(driver, ex)
            what = _move(driver, control)
            after = wait_for(lambda: (s := _explorer_snapshot(driver, ex)) != before and s, timeout=5)
            after = after or _explorer_snapshot(driver, ex)
            assert after[0] != before[0], f"{label}: control {j} ({what}) did not change data-state"
            assert after[1] != before[1], f"{label}: control {j} ({what}) did not redraw the svg"

        # sliders and selects first, then a click on a query row (it must highlight the row),
        # then the buttons (some, like "clear row", only do something once a row is selected)
        for j, control in enumerate(ex.find_elements(By.CSS_SELECTOR, "input[type=range], select")):
            if control.is_displayed() and control.is_enabled():
                operate(control, j)
        rows = [r for r in ex.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot .attnlib-rowlabel[data-row]")
                if r.is_displayed()] or ex.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot [data-value]")
        assert rows, f"{label}: no row labels or cells to click"
        before = _explorer_snapshot(driver, ex)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", rows[len(rows) // 2])
        ActionChains(driver).move_to_element(rows[len(rows) // 2]).click().perform()
        after = wait_for(lambda: (s := _explorer_snapshot(driver, ex)) != before and s, timeout=5)
        assert after and after[0] != before[0] and after[1] != before[1], \
            f"{label}: clicking a query row did not highlight it (data-state/svg unchanged)"
        for j, control in enumerate(ex.find_elements(By.CSS_SELECTOR, "button")):
            if control.is_displayed() and control.is_enabled():
                operate(control, j)
        shot(ex, f"{label}_after")

        cells = ex.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot [data-value]")
        assert cells, f"{label}: no cells with data-value"
        cell = cells[len(cells) // 2]
        value = float(cell.get_attribute("data-value"))
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
        ActionChains(driver).move_to_element(cell).perform()

        def tooltip_text():
            tips = ex.find_elements(By.CSS_SELECTOR, ".attnlib-tooltip") or \
                driver.find_elements(By.CSS_SELECTOR, ".attnlib-tooltip")
            shown = [t.text for t in tips if t.is_displayed() and t.text.strip()]
            return shown[0] if shown else ""

        text = wait_for(tooltip_text, timeout=5)
        assert text, f"{label}: hovering a cell showed no .attnlib-tooltip"
        assert numbers_in(text), f"{label}: tooltip {text!r} shows no number"
        assert close_to(text, value), f"{label}: tooltip {text!r} does not show the cell's value {value}"
        shot(ex, f"{label}_hover")

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

sys.path.insert(0, str(ROOT / "tests"))
from _browser import port_open  # noqa: E402

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


JS_TEXT_OUTSIDE_PLOTS = """
const out = [];
document.querySelectorAll('article svg').forEach((svg, k) => {
  if (!svg.getClientRects().length) return;  // a closed panel, a hidden state
  const vb = svg.viewBox.baseVal, W = vb && vb.width || svg.width.baseVal.value;
  svg.querySelectorAll('text').forEach(t => {
    if (t.getAttribute('visibility') === 'hidden' || t.closest('[transform]')) return;
    const b = t.getBBox();
    if (b.width && (b.x < -1 || b.x + b.width > W + 1))
      out.push(`svg ${k} (${svg.getAttribute('class')}): "${t.textContent}" spans x `
               + `${b.x.toFixed(0)}..${(b.x + b.width).toFixed(0)} of 0..${W.toFixed(0)}`);
  });
});
document.querySelectorAll('article svg.attnlib-plot').forEach((svg, k) => {
  // column labels at 45 degrees lie 0.71 of their spacing apart: under 17 px, 12 px text touches
  const xs = [...svg.querySelectorAll('text.attnlib-collabel[transform]')]
    .filter(t => t.getAttribute('visibility') !== 'hidden').map(t => +t.getAttribute('x'))
    .sort((a, b) => a - b);
  for (let i = 1; i < xs.length; i++)
    if (xs[i] - xs[i - 1] < 17) {
      out.push(`svg ${k}: slanted column labels ${(xs[i] - xs[i - 1]).toFixed(1)} px apart`);
      break;
    }
});
return out;"""


def test_page_plot_text_inside_its_drawing(driver, page):
    """No label of an in-page drawing (a heatmap's title, a colour bar's key) runs past its
    edge, where the browser cuts it off: chapter 4's 'weight = softmax(q·k / √3) on each key',
    centred under two columns, once lost its first three letters, and the colour bars' key
    'masked' its last one. Nor do slanted column labels run into each other (chapter 11's
    '10 11 12' at 15 px apart)."""
    outside = driver.execute_script(JS_TEXT_OUTSIDE_PLOTS)
    assert not outside, f"{page[0]}: labels cut off or run together: {outside[:5]}"


# What a precomputed slider shows: the states not hidden, and each one's pictures and text.
JS_PSLIDER_SHOWN = """
const root = arguments[0];
const states = Array.from(root.querySelector('.attnlib-pslider-states').children);
return states.map((s, k) => [k, s.getAttribute('data-label')]).filter(([k]) => !states[k].hidden
    && states[k].getClientRects().length).map(([k, label]) => [k, label,
    Array.from(states[k].querySelectorAll('img')).map(i => i.src.length + ':' + i.src.slice(-80)).join(' ')
    + '|' + states[k].innerText.slice(0, 400)]);
"""


def test_page_widget_sliders_move(driver, page):
    """Every slider of the page moves with the keyboard and changes what it shows: the book's own
    precomputed sliders (scripts/book_checks.py, PrecomputedSliders: a range input over the stored
    states) and any live ipywidgets slider still drawn by the widget manager."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def nudge(element, read):
        """Focus a slider and press the right arrow (the left one at its top end); return the
        value it had before, as ``read`` reads it."""
        value = read()
        driver.execute_script("arguments[0].focus();", element)
        element.send_keys(Keys.ARROW_RIGHT)
        if read() == value:
            element.send_keys(Keys.ARROW_LEFT)
        return value

    docname = page[0]
    for k, root in enumerate(driver.find_elements(By.CSS_SELECTOR, "div.attnlib-pslider")):
        label = f"{docname}__pslider{k}"
        r = root.find_element(By.CSS_SELECTOR, "input.attnlib-pslider-range")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
        before = driver.execute_script(JS_PSLIDER_SHOWN, root)
        assert len(before) == 1 and before[0][2].strip("| "), f"{label}: shows {before}"
        shot(root, f"{label}_before")
        value = nudge(r, lambda: r.get_attribute("value"))
        assert r.get_attribute("value") != value, f"{label}: the slider did not move"
        after = driver.execute_script(JS_PSLIDER_SHOWN, root)
        shot(root, f"{label}_after")
        assert len(after) == 1 and after[0][0] == int(r.get_attribute("value")), \
            f"{label}: value {r.get_attribute('value')} shows states {[a[:2] for a in after]}"
        assert after[0][2] != before[0][2], f"{label}: moving the slider changed nothing visible"
        assert root.find_element(By.CSS_SELECTOR, "output").text == after[0][1], \
            f"{label}: the read-out does not say the value {after[0][1]!r}"
    sliders = driver.find_elements(By.CSS_SELECTOR, ".widget-subarea .widget-slider")
    for k, slider in enumerate(sliders):
        label = f"{docname}__slider{k}"
        root = driver.execute_script("return arguments[0].closest('.widget-subarea');", slider)
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", root)
        before = driver.execute_script(JS_VISIBLE_CONTENT, root)
        shot(root, f"{label}_before")
        handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
        value = nudge(handle, lambda: handle.get_attribute("aria-valuenow"))
        assert handle.get_attribute("aria-valuenow") != value, f"{label}: the slider did not move"
        after = wait_for(lambda: (c := driver.execute_script(JS_VISIBLE_CONTENT, root)) != before and c,
                         timeout=5)
        shot(root, f"{label}_after")
        assert after, (f"{label}: moving the slider ({value} -> {handle.get_attribute('aria-valuenow')}) "
                       "changed nothing visible; is it linked client-side (viz.precomputed_slider)?")


def hover_cell(driver, cell) -> None:
    """Put the pointer on a heatmap cell. A matrix painted on a canvas (the live model's) keeps its
    cells as hidden rects that carry the values: the pointer goes where the rect would be drawn."""
    from selenium.webdriver.common.action_chains import ActionChains

    if cell.is_displayed():
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
        ActionChains(driver).move_to_element(cell).perform()
        return
    svg = driver.execute_script("return arguments[0].ownerSVGElement", cell)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", svg)
    dx, dy = driver.execute_script("""
        const r = arguments[0], svg = r.ownerSVGElement, box = svg.getBoundingClientRect();
        const p = new DOMPoint(+r.getAttribute('x') + r.getAttribute('width') / 2,
                               +r.getAttribute('y') + r.getAttribute('height') / 2)
          .matrixTransform(svg.getScreenCTM());
        return [p.x - (box.left + box.width / 2), p.y - (box.top + box.height / 2)];""", cell)
    ActionChains(driver).move_to_element_with_offset(svg, int(dx), int(dy)).perform()


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
        if "attnlib-llm" in (ex.get_attribute("class") or "").split():
            continue  # the SmolLM2 lab draws once its button has fetched 98 MB: its own test below
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
        hover_cell(driver, cell)

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


# =============================================================================================
# The book on a phone and at first sight (issue 36): navigation, first screen, legible figures,
# diagrams that fit, dark theme, page weight, focus, search snippets. Two viewports, as a reader
# holds them: a phone (390 x 844, touch, the page's mobile viewport) and a laptop (1280 x 800).
# Screenshots go to artifacts/screenshots/issue36/ (look at them: a test cannot see everything).

import base64  # noqa: E402
import hashlib  # noqa: E402

PHONE, LAPTOP = (390, 844), (1280, 800)
SHOTS36 = SHOTS / "issue36"
CHAPTERS = [p for p in PAGES if p.startswith("notebooks/")]
MIN_TEXT_PX = 9.0          # plot text at a phone's column width
MAX_PAGE_BYTES = 4_000_000  # uncompressed, everything a page loads
DEFAULT_TEXT_PX = 10 * 100 / 72  # matplotlib's 10 pt at 100 dpi, for a PNG without metadata
# Pages whose figures or weight depend on chapter outputs another engineer has not regenerated
# yet (their notebooks need re-executing with scripts/execute_notebooks.py, or a figure drawn
# narrower: see the issue-36 report). A listed page that passes is fine (the list may shrink).
AWAITING_FIGURES: dict[str, str] = {}
# (chapter 4, listed here at 4.05 MB, loads 1.99 MB since its precomputed sliders are the book's
# own HTML and the page no longer loads the 1.9 MB widget manager)
AWAITING_WEIGHT: dict[str, str] = {}


def _png_metadata() -> dict[str, dict]:
    """{file name in _images: image/png metadata} for every figure a notebook stored: myst-nb
    names an output image by the sha256 of its bytes, so the name finds its metadata."""
    found: dict[str, dict] = {}
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        outputs = [o for c in nb.get("cells", []) for o in c.get("outputs", []) or []]
        state = nb.get("metadata", {}).get("widgets", {}).get(
            "application/vnd.jupyter.widget-state+json", {}).get("state", {})
        outputs += [o for m in state.values() for o in m.get("state", {}).get("outputs", []) or []]
        for out in outputs:
            data = (out.get("data") or {}).get("image/png")
            if data:
                raw = base64.b64decode("".join(data) if isinstance(data, list) else data)
                meta = (out.get("metadata") or {}).get("image/png", {})
                found[hashlib.sha256(raw).hexdigest()] = meta
    return found



def _viewport_driver(size: tuple[int, int]):
    """A headless Chromium whose page viewport is exactly ``size`` (a phone's is a mobile one)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="attnlib-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--window-size={size[0]},{size[1]}",
                 f"--user-data-dir={profile}", "--force-device-scale-factor=1"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(90)
    drv.set_script_timeout(60)
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": size[0] < 600})
    drv.execute_cdp_cmd("Network.enable", {})
    drv.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})  # each page whole
    drv._attnlib_profile = profile
    return drv


@pytest.fixture(scope="module")
def phone():
    drv = _viewport_driver(PHONE)
    yield drv
    drv.quit()
    shutil.rmtree(drv._attnlib_profile, ignore_errors=True)


@pytest.fixture(scope="module")
def laptop():
    drv = _viewport_driver(LAPTOP)
    yield drv
    drv.quit()
    shutil.rmtree(drv._attnlib_profile, ignore_errors=True)


def shot36(drv, name: str) -> None:
    SHOTS36.mkdir(parents=True, exist_ok=True)
    drv.save_screenshot(str(SHOTS36 / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"))


def open_page(drv, server: str, docname: str, theme: str = "light") -> None:
    """Load a page as a reader would, in the given colour theme, and wait for it to settle; the
    console must stay free of errors (a theme script that lost an element it measures, say)."""
    drv.get_log("browser")
    drv.get(f"http://{server}/{docname}.html")
    drv.execute_script("localStorage.setItem('mode', arguments[0]);"
                       "localStorage.setItem('theme', arguments[0]);", theme)
    drv.get(f"http://{server}/{docname}.html")
    wait_for(lambda: drv.execute_script("return document.readyState") == "complete")
    drv.execute_async_script(JS_MATHJAX_READY)
    wait_for(lambda: not drv.execute_script(JS_WIDGETS_PENDING), timeout=30)
    wait_for(lambda: drv.execute_script(
        "return Array.from(document.images).every(i => i.complete)"), timeout=20)
    time.sleep(0.4)
    assert drv.execute_script("return document.documentElement.dataset.theme") == theme
    severe = [e["message"] for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, f"{docname} ({theme}): console errors: {severe[:3]}"


# ------------------------------------------------------------------------------- navigation
JS_NAV_STATE = """
const p = document.getElementById('pst-primary-sidebar');
const pm = document.getElementById('pst-primary-sidebar-modal');
const sm = document.getElementById('pst-secondary-sidebar-modal');
const shown = e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'
                   && e.getBoundingClientRect().width > 50;
const links = e => e ? Array.from(e.querySelectorAll('a')).filter(a => a.getClientRects().length).length : 0;
return {primaryModal: !!pm && pm.open, secondaryModal: !!sm && sm.open,
        sidebarShown: shown(p), modalLinks: links(pm), tocLinks: links(sm)};
"""


def _visible(drv, selector):
    from selenium.webdriver.common.by import By

    return [b for b in drv.find_elements(By.CSS_SELECTOR, selector) if b.is_displayed()]


@pytest.mark.parametrize("docname", ["notebooks/04_scaled_dot_product_attention", "book/intro"])
def test_navigation_opens_on_a_phone(phone, server, docname):
    """The visible sidebar button opens the site navigation, the contents button the page's
    contents: clicked as a reader taps them (the themes' scripts were bound to hidden copies)."""
    from selenium.webdriver.common.keys import Keys

    open_page(phone, server, docname)
    name = docname.replace("/", "_")
    for selector, key, links, least in ((".primary-toggle", "primaryModal", "modalLinks", 10),
                                        (".secondary-toggle", "secondaryModal", "tocLinks", 1)):
        buttons = _visible(phone, selector)
        if selector == ".secondary-toggle" and docname == "book/intro" and not buttons:
            continue  # a page without sections has no contents button
        assert len(buttons) == 1, f"{docname}: {len(buttons)} visible {selector} buttons"
        assert not phone.execute_script(JS_NAV_STATE)[key]
        buttons[0].click()
        state = wait_for(lambda: (s := phone.execute_script(JS_NAV_STATE))[key] and s, timeout=5)
        assert state, f"{docname}: tapping {selector} opened nothing"
        assert state[links] >= least, f"{docname}: the {key} holds {state[links]} visible links"
        shot36(phone, f"nav_{name}_{selector[1:]}_390")
        phone.switch_to.active_element.send_keys(Keys.ESCAPE)
        assert wait_for(lambda: not phone.execute_script(JS_NAV_STATE)[key], timeout=5), \
            f"{docname}: Escape did not close the {key}"


def test_navigation_collapses_on_a_laptop(laptop, server):
    """At 1280 px the sidebar is open, and the hamburger hides it and shows it again; the page's
    contents sit in the right-hand column (no button needed)."""
    docname = "notebooks/04_scaled_dot_product_attention"
    open_page(laptop, server, docname)
    assert laptop.execute_script(JS_NAV_STATE)["sidebarShown"]
    (button,) = _visible(laptop, ".primary-toggle")
    for shown in (False, True):
        button.click()
        assert wait_for(lambda: laptop.execute_script(JS_NAV_STATE)["sidebarShown"] == shown,
                        timeout=5), f"the hamburger did not {'show' if shown else 'hide'} the sidebar"
        time.sleep(0.3)  # the theme's slide transition
        shot36(laptop, f"nav_sidebar_{'shown' if shown else 'hidden'}_1280")
    toc = laptop.execute_script(
        "const t = document.querySelector('#pst-secondary-sidebar');"
        "return t && t.getBoundingClientRect().left > 900 ? t.querySelectorAll('a').length : 0;")
    assert toc >= 5, "no contents column at 1280 px"


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1280"])
def test_no_second_header_band(size, phone, laptop, server):
    """One toolbar above the article: no 64 px band holding a second search box."""
    drv = phone if size == PHONE else laptop
    open_page(drv, server, "notebooks/02_embeddings_positions")
    bands = drv.execute_script(
        "return Array.from(document.querySelectorAll('header.bd-header, #pst-header'))"
        ".filter(e => e.getClientRects().length).length")
    assert bands == 0, "the theme's navbar band is back"
    top = drv.execute_script("return document.querySelector('.bd-header-article')"
                             ".getBoundingClientRect().top")
    assert top == 0, f"the article toolbar starts {top} px down"
    fields = [b for b in _visible(drv, ".search-button-field")
              if b.rect["y"] < 100 and not b.find_elements("xpath", "ancestor::*[contains(@class,'bd-sidebar')]")]
    assert fields == [], "a search box above the article"


def test_toolbar_buttons_show_focus(laptop, server):
    """A keyboard reader sees which toolbar button has the focus (the theme removed the ring)."""
    from selenium.webdriver.common.keys import Keys

    open_page(laptop, server, "notebooks/01_tokens")
    # start from the last link of the sidebar, the element just before the toolbar in Tab order
    laptop.execute_script("const a = document.querySelectorAll('.bd-sidebar-primary a');"
                          "a[a.length - 1].focus();")
    seen = 0
    for _ in range(30):
        laptop.switch_to.active_element.send_keys(Keys.TAB)
        ring = laptop.execute_script(
            "const e = document.activeElement;"
            "if (!e.closest('.bd-header-article')) return null;"
            "const cs = getComputedStyle(e);"
            "return [cs.outlineStyle, parseFloat(cs.outlineWidth), e.className];")
        if ring:
            assert ring[0] != "none" and ring[1] >= 1, f"toolbar button {ring[2]!r} has no focus ring"
            seen += 1
            if seen == 1:
                shot36(laptop, "focus_ring_1280")
            if seen >= 3:
                break
    assert seen >= 3, "Tab never reached three toolbar buttons"


# ----------------------------------------------------------------------------- first screen
JS_FIRST_SCREEN = """
const art = document.querySelector('article.bd-article');
const h1 = art.querySelector('h1');
const before = Array.from(art.querySelectorAll('details, .cell'))
  .filter(e => h1.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_PRECEDING && !e.contains(h1));
const vh = innerHeight;
const pictures = Array.from(art.querySelectorAll(
    'img, svg.attnlib-plot, div.attnlib-explorer, .widget-subarea'))
  .filter(e => e.getClientRects().length)
  .map(e => { const r = e.getBoundingClientRect();
              return [e.tagName, Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0)),
                      Math.round(r.top)]; })
  .filter(p => p[1] > 0);
return {before: before.length, h1Top: h1.getBoundingClientRect().top, pictures};
"""


@pytest.mark.parametrize("docname", CHAPTERS)
def test_first_screen_title_then_picture(laptop, server, docname):
    """At 1280 x 800 a chapter opens with its title (the setup cell is below the introduction,
    no 'Show code cell source' bar above the title) and a picture of at least 200 px on screen."""
    open_page(laptop, server, docname)
    laptop.execute_script("window.scrollTo(0, 0)")
    first = laptop.execute_script(JS_FIRST_SCREEN)
    shot36(laptop, f"first_screen_{docname.replace('/', '_')}_1280")
    assert first["before"] == 0, f"{docname}: {first['before']} cell(s) above the title"
    assert first["h1Top"] < 120, f"{docname}: the title starts {first['h1Top']:.0f} px down"
    big = [p for p in first["pictures"] if p[1] >= 200]
    assert big, f"{docname}: no picture on the first screen ({first['pictures'][:3]})"


JS_FIRST_EXPLORER = """
const art = document.querySelector('article.bd-article') || document.querySelector('main');
const top = art.getBoundingClientRect().top + window.scrollY, height = art.scrollHeight;
const first = Array.from(art.querySelectorAll(
    'div.attnlib-explorer, div.attnlib-exercise, div.attnlib-pslider'))
  .filter(e => e.getClientRects().length && !e.closest('details:not([open])'))
  .map(e => e.getBoundingClientRect().top + window.scrollY - top)[0];
return first === undefined ? null : first / height;
"""


@pytest.mark.parametrize("docname", CHAPTERS)
def test_an_explorer_in_the_first_40_percent_of_every_chapter(laptop, server, docname):
    """Play first (issue 47): each chapter's first computing explorer, exercise or slider starts
    in the first 40% of its page at 1280 px (chapters 4 and 5 open with 'Try it first')."""
    open_page(laptop, server, docname)
    at = laptop.execute_script(JS_FIRST_EXPLORER)
    assert at is not None, f"{docname}: no explorer on the page"
    print(f"{docname}: first explorer at {100 * at:.0f}% of the page")
    assert at < 0.40, f"{docname}: the first explorer starts at {100 * at:.0f}% of the page"


def test_setup_cell_is_kept_below_the_introduction(laptop, server):
    """The setup cell is still on the page (folded), after the learning goals."""
    open_page(laptop, server, "notebooks/01_tokens")
    where = laptop.execute_script(
        "const c = document.querySelector('.attnlib-setup-cell');"
        "const goals = Array.from(document.querySelectorAll('article p strong'))"
        ".find(s => /What you will learn/.test(s.textContent));"
        "return c && goals ? [!!c.querySelector('details'), "
        "!!(goals.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING), "
        "c.textContent.includes('seed_everything')] : null;")
    assert where == [True, True, True], where


@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280", "390"])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_landing_page_opens_with_the_live_model(size, theme, phone, laptop, server):
    """The book's first page shows the tiny GPT running, on the first screen at 1280 x 800 and
    at 390 x 844 (its text box and the top of its attention grid), and it computes: typing
    moves the next-character bars to the new last character."""
    from selenium.webdriver.common.keys import Keys

    drv = laptop if size == LAPTOP else phone
    open_page(drv, server, "book/intro", theme)
    drv.execute_script("window.scrollTo(0, 0)")
    where = drv.execute_script(
        "const box = document.querySelector('article .attnlib-live textarea');"
        "const grid = document.querySelector('article .attnlib-live svg, article .attnlib-live canvas');"
        "return box && grid ? [box.getBoundingClientRect().bottom,"
        " grid.getBoundingClientRect().top, innerHeight] : null;")
    shot36(drv, f"landing_{size[0]}_{theme}")
    assert where, "the landing page has no live model (text box and attention grid)"
    box_bottom, grid_top, height = where
    assert box_bottom < height and grid_top < height - 100, where  # both on the first screen
    head = lambda: drv.execute_script(
        "return document.querySelector('article .attnlib-bars-head').textContent")
    assert "after \u201cd\u201d" in head(), head()  # "And God said"
    box = drv.find_element("css selector", "article .attnlib-live textarea")
    box.send_keys(Keys.END, " an")
    wait_for(lambda: "after \u201cn\u201d" in head(), timeout=10)


# ------------------------------------------------------------------------- figures on a phone
JS_FIGURES = """
const col = document.querySelector('article.bd-article');
const right = col.getBoundingClientRect().right;
return Array.from(document.querySelectorAll('article img'))
  .filter(i => i.getClientRects().length && i.naturalWidth > 120)  /* figures, not logos */
  .map(i => { const r = i.getBoundingClientRect();
              return {src: i.currentSrc || i.src, w: r.width, right: r.right, colRight: right,
                      natural: i.naturalWidth, attrWidth: i.getAttribute('width'),
                      diagram: i.classList.contains('attnlib-diagram')}; });
"""


def _png_name(src: str) -> str:
    if src.startswith("data:image/png;base64,"):
        return hashlib.sha256(base64.b64decode(src.split(",", 1)[1])).hexdigest()
    return Path(urlsplit(src).path).stem


@pytest.fixture(scope="module")
def png_meta():
    return _png_metadata()


JS_OUTPUT_FIGURES = """
return Array.from(document.querySelectorAll('article div.cell_output img'))
  .filter(i => i.getClientRects().length && /[.]png$/.test(i.src))
  .map(i => { const out = i.closest('div.cell_output');
              return [i.getBoundingClientRect().width, i.naturalWidth,
                      out.querySelectorAll('img').length, out.clientWidth]; });
"""


@pytest.mark.parametrize("docname", CHAPTERS)
def test_output_figures_use_the_column_on_a_laptop(laptop, server, docname):
    """At 1280 px a matplotlib figure is not left at half its pixels (IPython's retina size, 332 px
    of a 740 px column for a 5-inch figure): it grows to the column, or half of it beside
    another, up to 0.8x its pixels (book_checks.GROWTH = 1.6 times the retina size)."""
    open_page(laptop, server, docname)
    for width, natural, beside, room in laptop.execute_script(JS_OUTPUT_FIGURES):
        room = room if beside == 1 else room / 2 - 8  # the output area, or half of it
        assert width >= min(room, 0.8 * natural) - 2, (docname, width, natural, beside, room)


@pytest.mark.parametrize("docname", PAGES)
def test_phone_figures_fit_and_read(phone, server, png_meta, docname):
    """At 390 px nothing scrolls sideways, every figure fits the column, diagrams switch to their
    narrow layout at its own size, and plot text is at least 9 px on screen: the figure's smallest
    text (metadata ``text_px``, written by attnlib's figure export) times its displayed scale."""
    open_page(phone, server, docname)
    name = docname.replace("/", "_")
    shot36(phone, f"phone_{name}_390")
    width = phone.execute_script("return document.scrollingElement.scrollWidth")
    assert width <= PHONE[0], f"{docname}: the page scrolls sideways ({width} px)"
    problems = []
    for fig in phone.execute_script(JS_FIGURES):
        label = fig["src"][-60:]
        if fig["right"] > fig["colRight"] + 1:
            problems.append(f"{label}: runs {fig['right'] - fig['colRight']:.0f} px off the column")
        if fig["diagram"]:
            if not fig["src"].endswith(".narrow.svg"):
                problems.append(f"{label}: the wide diagram on a phone")
            elif fig["w"] < 0.97 * min(fig["natural"], fig["colRight"]):
                problems.append(f"{label}: narrow diagram shrunk to {fig['w']:.0f} px")
            continue
        if fig["src"].endswith(".svg"):
            continue
        meta = png_meta.get(_png_name(fig["src"]), {})
        css = meta.get("width") or fig["natural"]
        text = meta.get("text_px", DEFAULT_TEXT_PX) * fig["w"] / css
        if text < MIN_TEXT_PX:
            problems.append(f"{label}: smallest text {text:.1f} px on screen ({css} px figure "
                            f"shown at {fig['w']:.0f})")
    if problems and docname in AWAITING_FIGURES:
        pytest.xfail(f"{AWAITING_FIGURES[docname]}: {problems[:3]}")
    assert not problems, f"{docname}: {problems}"


def _luminance(png: bytes) -> float:
    """Median luminance (0 black, 1 white) of a figure's outer frame (4 px at its edges): its
    background, whatever the colours drawn inside."""
    from PIL import Image
    import io as _io

    im = Image.open(_io.BytesIO(png)).convert("L")
    w, h = im.size
    px = im.load()
    ring = [px[x, y] for x in range(w) for y in (*range(4), *range(h - 4, h))] + \
           [px[x, y] for y in range(4, h - 4) for x in (*range(4), *range(w - 4, w))]
    ring.sort()
    return ring[len(ring) // 2] / 255


@pytest.mark.parametrize("docname", ["notebooks/04_scaled_dot_product_attention",
                                     "notebooks/07_transformer_block", "notebooks/05_masks",
                                     "notebooks/16_real_modern_model"])
@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1280"])
def test_dark_theme_figures_follow(size, phone, laptop, server, docname):
    """In the dark theme a figure is not a white card: its background turns to the page's and its
    ink light (the filter of book/_templates/layout.html), while in the light theme the same
    figure stays white. Measured on the pixels of the figure as drawn."""
    from selenium.webdriver.common.by import By

    drv = phone if size == PHONE else laptop
    lum = {}
    for theme in ("light", "dark"):
        open_page(drv, server, docname, theme)
        figs = [f for f in drv.find_elements(By.CSS_SELECTOR,
                                             "article div.cell_output img, article img.attnlib-diagram")
                if f.is_displayed() and f.size["height"] > 120][:3]
        assert figs, f"{docname}: no figure"
        lum[theme] = []
        for k, fig in enumerate(figs):
            drv.execute_script("arguments[0].scrollIntoView({block: 'center'})", fig)
            time.sleep(0.2)
            lum[theme].append(_luminance(fig.screenshot_as_png))
            if k == 0:
                shot36(drv, f"{theme}_{docname.replace('/', '_')}_{size[0]}")
    assert all(v > 0.85 for v in lum["light"]), f"{docname}: light figures {lum['light']}"
    assert all(v < 0.25 for v in lum["dark"]), f"{docname}: dark figures stay light {lum['dark']}"


def _contrast(a: float, b: float) -> float:
    """WCAG contrast ratio of two relative luminances."""
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _rel_lum(rgb: tuple) -> float:
    """WCAG relative luminance of an sRGB pixel (0-255 each)."""
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = rgb[:3]
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1280"])
def test_dark_theme_diagram_labels_in_colour_read(size, phone, laptop, server):
    """A diagram's label written in colour (chapter 10's "K cache (rows = tokens)" in K's orange,
    at x 30-180, y 161-178 of the 680 x 580 drawing) reads in the dark theme: around it the page
    is dark (its median pixel), its brightest pixels are the letters in orange, and they stand out
    from the page at 4.5:1 or more. The figure filter once closed such letters into blobs with
    white between the strokes (white pixels, 16% of the box)."""
    from PIL import Image
    import io as _io
    from selenium.webdriver.common.by import By

    drv = phone if size == PHONE else laptop
    open_page(drv, server, "notebooks/10_tiny_gpt", "dark")
    img = next(i for i in drv.find_elements(By.CSS_SELECTOR, "article img.attnlib-diagram")
               if "kv_cache" in (i.get_attribute("currentSrc") or ""))
    drv.execute_script("arguments[0].scrollIntoView({block: 'start'})", img)
    time.sleep(0.2)
    # the phone's drawing is taller than the screen: read the label off the window's pixels
    left, top, width = drv.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width];", img)
    page = Image.open(_io.BytesIO(drv.get_screenshot_as_png())).convert("RGB")
    narrow = "narrow" in img.get_attribute("currentSrc")
    if narrow:  # the phone's layout draws the label elsewhere: find it in that drawing
        svg = (ROOT / "book" / "figures" / "kv_cache.narrow.svg").read_text(encoding="utf-8")
        m = re.search(r'<svg[^>]*viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
        vw = float(m.group(1))
        t = re.search(r'<text x="([\d.]+)" y="([\d.]+)"[^>]*>K cache', svg)
        x0, y0 = float(t.group(1)), float(t.group(2)) - 13
        box = (x0, y0, x0 + 150, y0 + 17)
    else:
        vw, box = 680.0, (30, 161, 180, 178)
    k = width / vw
    crop = page.crop((round(left + box[0] * k), round(top + box[1] * k),
                      round(left + box[2] * k), round(top + box[3] * k)))
    import colorsys
    grid = crop.load()
    px = sorted((_rel_lum(grid[x, y]), grid[x, y])
                for x in range(crop.size[0]) for y in range(crop.size[1]))
    ground, ink = px[len(px) // 2][0], px[-1][0]
    # the brightest tenth of the box is the letters: in orange, not white halos around them
    sat = sorted(colorsys.rgb_to_hsv(*(c / 255 for c in p))[1] for _, p in px[-len(px) // 10:])
    assert ground < 0.05, f"{size}: the label sits on a light patch (luminance {ground:.2f})"
    assert sat[len(sat) // 2] >= 0.5, (
        f"{size}: the label's brightest pixels are grey or white (saturation "
        f"{sat[len(sat) // 2]:.2f}), not K's orange: the letters are blurred into blobs")
    assert _contrast(ink, ground) >= 4.5, (
        f"{size}: the label's letters reach only {_contrast(ink, ground):.1f}:1 on the dark page")


@pytest.mark.parametrize("docname", ["notebooks/03_queries_keys_values", "notebooks/08_real_heads",
                                     "notebooks/11_rope", "notebooks/16_real_modern_model"])
def test_phone_plot_text_inside_its_drawing(phone, server, docname):
    """test_page_plot_text_inside_its_drawing on a phone, where heatmaps are narrowest: chapter
    16's 24 slanted token labels once ran together, 13 px apart."""
    open_page(phone, server, docname)
    outside = phone.execute_script(JS_TEXT_OUTSIDE_PLOTS)
    assert not outside, f"{docname} (390 px): labels cut off or run together: {outside[:5]}"


# ------------------------------------------------------------------------ precomputed slider
PSLIDER_PAGE = "notebooks/02_embeddings_positions"


def _stored_slider(docname: str) -> dict:
    """The first precomputed slider of a chapter, as its notebook stored it (labels, the state it
    opens on, each state's outputs), read by the book's own reader of widget state."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import book_checks

    nb = json.loads((ROOT / f"{docname}.ipynb").read_text(encoding="utf-8"))
    state = nb["metadata"]["widgets"][book_checks.WIDGET_STATE]["state"]
    views = [o["data"][book_checks.WIDGET_VIEW]["model_id"] for c in nb["cells"]
             for o in c.get("outputs", []) if book_checks.WIDGET_VIEW in o.get("data", {})]
    parts = [p for p in (book_checks.precomputed_slider_parts(state, v) for v in views) if p]
    assert parts, f"{docname}: no precomputed slider in the notebook"
    return parts[0]


@pytest.mark.skipif(PSLIDER_PAGE not in PAGES, reason="chapter 2 is not in this table of contents")
@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["390", "1280"])
def test_precomputed_slider_shows_the_stored_state(size, phone, laptop, server):
    """Chapter 2's precomputed slider, drawn by the book without the widget manager: moved with the
    keyboard (ArrowRight) and set to a value (the last), it shows exactly the notebook's stored
    picture of that value (the PNG of the Stack's output for it) and says the value beside the
    slider and to a screen reader; the picture fits the column."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    drv = phone if size == PHONE else laptop
    stored = _stored_slider(PSLIDER_PAGE)
    labels, name = stored["labels"], stored["description"]
    pngs = [["data:image/png;base64," + "".join(o["data"]["image/png"]).replace("\n", "")
             for o in outs if "image/png" in o.get("data", {})] for outs in stored["states"]]
    assert all(pngs) and len(set(map(tuple, pngs))) == len(labels), "states without distinct figures"
    open_page(drv, server, PSLIDER_PAGE)
    names = drv.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    assert not any("html-manager" in n for n in names), "the widget manager was loaded"
    root = drv.find_element(By.CSS_SELECTOR, "div.attnlib-pslider")
    r = root.find_element(By.CSS_SELECTOR, "input.attnlib-pslider-range")
    assert r.get_attribute("aria-label") == name and r.get_attribute("max") == str(len(labels) - 1)

    def check(k: int, how: str) -> None:
        shown = [img for img in root.find_elements(By.CSS_SELECTOR, "img") if img.is_displayed()]
        assert shown, f"{how}: no picture shown"
        srcs = [img.get_attribute("src") for img in shown]
        which = [next((j for j, st in enumerate(pngs) if src in st), "?") for src in srcs]
        assert srcs == pngs[k], (f"{how}: the pictures shown are not the stored state "
                                 f"{labels[k]!r} (they are of states {which})")
        assert r.get_attribute("value") == str(k), f"{how}: value {r.get_attribute('value')}"
        assert root.find_element(By.CSS_SELECTOR, "output").text == labels[k], f"{how}: read-out"
        assert r.get_attribute("aria-valuetext") == f"{name} {labels[k]}", f"{how}: aria-valuetext"
        right = drv.execute_script("return Math.max(...arguments[0].map(i => "
                                   "i.getBoundingClientRect().right))", shown)
        assert right <= size[0], f"{how}: the picture ends at {right} px, past the {size[0]} px screen"

    start = stored["index"]
    check(start, "opened")
    drv.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus();", r)
    r.send_keys(Keys.ARROW_RIGHT)
    check(start + 1, "ArrowRight")
    shot36(drv, f"pslider_{PSLIDER_PAGE.replace('/', '_')}_{size[0]}_arrow")
    last = len(labels) - 1
    drv.execute_script("arguments[0].value = arguments[1];"
                       "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", r, last)
    check(last, f"value set to {last}")
    r.send_keys(Keys.HOME)
    check(0, "Home")


# ----------------------------------------------------------------------------------- weight
JS_WEIGHT = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
return [nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0),
        res.map(r => [r.name, r.decodedBodySize])];
"""


@pytest.mark.parametrize("docname", PAGES)
def test_page_weight(laptop, server, docname):
    """A page loads at most ~4 MB (uncompressed) and only what it uses: no fontawesome.js, the
    widget manager only where widgets are, MathJax only where math is."""
    open_page(laptop, server, docname)
    total, files = laptop.execute_script(JS_WEIGHT)
    names = [urlsplit(n).path for n, _ in files]
    print(f"{docname}: {total / 1e6:.2f} MB in {len(files) + 1} requests")
    assert not any(n.endswith("fontawesome.js") for n in names), "fontawesome.js is loaded"
    html = (build_book.HTML / f"{docname}.html").read_text(encoding="utf-8")
    has_widgets = "application/vnd.jupyter.widget-state+json" in html
    assert any("html-manager/embed.js" in n for n in names) == has_widgets, \
        "the widget manager is loaded on a page without widgets, or missing on one with them"
    has_math = 'class="math' in html or "\\(" in html
    assert any("/mathjax/" in n for n in names) == has_math or has_math, \
        "MathJax loaded on a page without math"
    if not has_math:
        assert not any("/mathjax/" in n for n in names), "MathJax loaded on a page without math"
    if total > MAX_PAGE_BYTES and docname in AWAITING_WEIGHT:
        pytest.xfail(f"{total / 1e6:.2f} MB: {AWAITING_WEIGHT[docname]}")
    assert total <= MAX_PAGE_BYTES, (f"{docname}: {total / 1e6:.2f} MB; largest: "
                                     f"{sorted(files, key=lambda f: -f[1])[:5]}")


# ----------------------------------------------------------------------------------- SmolLM2 lab
LAB_PAGE = "book/smollm2_lab"


@pytest.mark.skipif(LAB_PAGE not in PAGES, reason="the SmolLM2 lab is not in this table of contents")
@pytest.mark.parametrize("size", [LAPTOP, PHONE], ids=["1280", "390"])
def test_smollm2_lab_loads_from_the_books_files(size, phone, laptop, server):
    """The built book's SmolLM2 lab (issue 46): nothing is fetched before its button, which names
    the model and its size; the button fetches the GGUF file the build copied next to the pages
    (the same host, models/), then the page answers with the model's own probabilities, with no
    other request. Screenshots in the light and the dark theme."""
    from selenium.webdriver.common.by import By

    drv = phone if size == PHONE else laptop
    open_page(drv, server, LAB_PAGE)
    root = drv.find_element(By.CSS_SELECTOR, "div.attnlib-llm")
    button = root.find_element(By.CSS_SELECTOR, "button.attnlib-llm-load")
    assert button.text == "Load SmolLM2-135M (98 MB)"
    drv.execute_script("arguments[0].scrollIntoView({block: 'start'})", root)
    shot36(drv, f"light_smollm2_lab_before_{size[0]}")
    before = requested_urls(drv)
    assert not any(u.endswith(".gguf") for u in before), "the model file was fetched before the click"
    assert (build_book.HTML / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    button.click()
    assert wait_for(lambda: "loaded=1" in (st := root.get_attribute("data-state")) and "busy=0" in st
                    or "failed" in st, timeout=240), root.get_attribute("data-state")
    assert "loaded=1" in root.get_attribute("data-state"), root.text[:500]
    urls = before + requested_urls(drv)
    assert f"http://{server}/models/SmolLM2-135M-Instruct.Q4_1.gguf" in urls, urls
    assert off_host(urls, server) == []
    bar = root.find_element(By.CSS_SELECTOR, ".attnlib-llm-probs .attnlib-bar")
    assert bar.text.split() == ["Paris", "0.77"], bar.text
    assert drv.execute_script("return document.documentElement.scrollWidth") <= size[0], "sideways scroll"
    for theme in ("light", "dark"):
        drv.execute_script("document.documentElement.dataset.theme = arguments[0]", theme)
        for k, part in enumerate(("div.attnlib-llm", ".attnlib-llm-att", ".attnlib-llm-switches",
                                  ".attnlib-llm-lens", ".attnlib-llm-chat")):
            el = drv.find_element(By.CSS_SELECTOR, part)
            drv.execute_script("arguments[0].scrollIntoView({block: 'start'})", el)
            time.sleep(0.3)
            shot36(drv, f"{theme}_smollm2_lab_{k}_{size[0]}")
    errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


# ----------------------------------------------------------------------------------- search
def test_search_snippets_show_no_raw_tex(laptop, server):
    """Search results quote the page's text, with its math as readable text, not TeX source."""
    laptop.get(f"http://{server}/search.html?q=softmax")
    snippets = lambda: laptop.execute_script(
        "return Array.from(document.querySelectorAll('#search-results li p.context'))"
        ".map(p => p.textContent)")
    wait_for(lambda: len(snippets()) >= 5, timeout=30)
    time.sleep(1.0)  # results keep arriving page by page
    found = snippets()
    assert found and len(found) >= 3, f"no search results with snippets: {found}"
    shot36(laptop, "search_softmax_1280")
    raw = [t for t in found if re.search(r"\\[()\[\]]|\\(frac|sqrt|mathrm|top|text)\b", t)]
    assert raw == [], f"snippets with raw TeX: {raw[:3]}"
    converted = laptop.execute_script(
        "return attnlibTexToText(arguments[0]);", r"\operatorname{softmax}(QK^\top/\sqrt{d_k})")
    assert converted == "softmax(QKᵀ/√(d_k))", converted


# ------------------------------------------------------------------- JupyterLab, untrusted
# A downloaded notebook opens untrusted in JupyterLab: its HTML goes through the sanitizer and
# widgets cannot draw. The chapters must still show their still pictures with their lines, and
# open without being marked as modified. Checked in JupyterLab itself (the jupyterlab package of
# this environment), headless, on copies of three chapters in a fresh profile (nothing trusted).

LAB_CHAPTERS = ["01_tokens.ipynb", "02_embeddings_positions.ipynb", "07_transformer_block.ipynb"]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    import socket
    import subprocess

    root = tmp_path_factory.mktemp("lab")
    home = tmp_path_factory.mktemp("lab-home")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "PYTHONPATH": str(ROOT)}
    # The copies carry this machine's kernel's own report of itself (language_info: the Python
    # version among it). JupyterLab writes that report into a notebook as it opens, so a chapter
    # executed under another patch release of Python opens "modified" on every reader's machine
    # whatever the book does; what the check is for is a change the book causes (stale widget
    # state, an old kernelspec). The second control shows that the report is what JupyterLab writes.
    here = _kernel_language_info(env)
    for name in LAB_CHAPTERS:
        nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
        nb["metadata"]["language_info"] = here
        (root / name).write_text(json.dumps(nb), encoding="utf-8")
    old = json.loads((root / LAB_CHAPTERS[0]).read_text(encoding="utf-8"))
    old["metadata"]["kernelspec"]["display_name"] = "Python 3"  # as the chapters were stored
    (root / "old_kernelspec.ipynb").write_text(json.dumps(old), encoding="utf-8")
    other = json.loads((root / LAB_CHAPTERS[0]).read_text(encoding="utf-8"))
    other["metadata"]["language_info"]["version"] = "3.0.0"  # executed by another Python
    (root / "other_python.ipynb").write_text(json.dumps(other), encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--ServerApp.token=attnlib", f"--ServerApp.root_dir={root}",
         "--allow-root", "--LabApp.news_url="],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        up = wait_for(lambda: port_open(port), timeout=60, interval=0.5)
        assert up, "JupyterLab did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _kernel_language_info(env: dict) -> dict:
    """What this machine's python3 kernel says of itself (its kernel_info reply's language_info)."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=90)
    try:
        return kc.kernel_info(reply=True, timeout=60)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


JS_LAB_STATE = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
const tab = document.querySelector('.lm-DockPanel .lm-TabBar-tab.lm-mod-current');
const kernel = document.querySelector('.jp-Toolbar-kernelName, .jp-KernelName');
return {cells: panel ? panel.querySelectorAll('.jp-Cell').length : 0,
        dirty: tab ? tab.classList.contains('jp-mod-dirty') : null,
        kernel: kernel ? kernel.textContent.trim() : ''};
"""


def _open_in_lab(drv, lab: str, name: str) -> dict:
    drv.get(f"{lab}/lab/tree/{name}?token=attnlib&reset")
    state = wait_for(lambda: (s := drv.execute_script(JS_LAB_STATE))["cells"] > 5
                     and "Python" in s["kernel"] and s, timeout=90, interval=0.5)
    assert state, f"{name} did not open in JupyterLab: {drv.execute_script(JS_LAB_STATE)}"
    time.sleep(3)  # the kernel's info arrives; JupyterLab then writes what it would save
    return drv.execute_script(JS_LAB_STATE)


def test_jupyterlab_opens_chapters_unmodified(laptop, jupyterlab):
    """A chapter opens clean; the old kernelspec ("Python 3") opened modified (the control). The
    chapters carry this machine's language_info (see the fixture); another Python's opens
    modified (the second control: JupyterLab writes the running kernel's report)."""
    assert _open_in_lab(laptop, jupyterlab, "old_kernelspec.ipynb")["dirty"] is True, \
        "the control case no longer opens modified: the check cannot see the difference"
    assert _open_in_lab(laptop, jupyterlab, "other_python.ipynb")["dirty"] is True, \
        "a notebook of another Python's version opened clean: the fixture's premise is gone"
    for name in LAB_CHAPTERS:
        state = _open_in_lab(laptop, jupyterlab, name)
        assert state["dirty"] is False, f"{name} opens in JupyterLab already modified: {state}"


JS_LAB_OUTPUTS = """
const out = [];
document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').forEach((cell, i) => {
  const area = cell.querySelector('.jp-OutputArea');
  if (!area) return;
  const text = area.innerText;
  const imgs = Array.from(area.querySelectorAll('img')).filter(im => im.getBoundingClientRect().width > 50).length;
  const tables = Array.from(area.querySelectorAll('table')).filter(t => t.getBoundingClientRect().height > 50)
    .map(t => Array.from(t.querySelectorAll('th')).map(th => th.innerText.replace(/\\u00a0/g, '').trim()));
  out.push({i, text: text.slice(0, 3000), imgs, tables});
});
return out;
"""


def _lab_outputs(drv):
    drv.execute_script("document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                       ".jp-WindowedPanel-outer, .jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook')"
                       ".scrollTop = 0")
    outputs, seen = [], set()
    for _ in range(400):  # JupyterLab draws only the cells near the view: scroll through them
        for o in drv.execute_script(JS_LAB_OUTPUTS):
            key = (o["text"][:200], o["imgs"], len(o["tables"]))
            if key not in seen:
                seen.add(key)
                outputs.append(o)
        at_end = drv.execute_script(
            "const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
            ".jp-WindowedPanel-outer') || document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
            ".jp-Notebook'); const before = s.scrollTop; s.scrollTop += 700;"
            "return s.scrollTop === before;")
        if at_end:
            break
        time.sleep(0.15)
    return outputs


def test_jupyterlab_untrusted_shows_stills_with_their_lines(laptop, jupyterlab):
    """Untrusted: each precomputed slider shows its first state (a figure, or its HTML) and the
    line saying what it is; each explorer shows its still picture as a grid whose labels are
    separate cells, never run together ("Theanimalrested...")."""
    found_slider_png = found_slider_html = found_still = 0
    for name in LAB_CHAPTERS:
        _open_in_lab(laptop, jupyterlab, name)
        for out in _lab_outputs(laptop):
            text = out["text"]
            if "precomputed states" in text:
                assert "The live slider appears" in text, f"{name}: a slider lost its line"
                if out["imgs"]:
                    found_slider_png += 1
                else:
                    found_slider_html += 1
                    assert len(text.split("precomputed states")[0].strip()) > 20, \
                        f"{name}: a slider of HTML states shows no picture of its first state"
            if "Interactive explorer" in text and "still picture" in text:
                labels = [t for t in out["tables"] if t]
                assert labels, f"{name}: an explorer's still picture was stripped: {text[:200]!r}"
                rows = [r for r in labels[0] if r][:3]
                assert len(rows) >= 2 and "".join(rows) not in text.replace("\n", ""), \
                    f"{name}: the still's labels run together: {text[:300]!r}"
                found_still += 1
        SHOTS36.mkdir(parents=True, exist_ok=True)
        laptop.save_screenshot(str(SHOTS36 / f"jupyterlab_{name}.png"))
    print(f"JupyterLab, untrusted: {found_slider_png} figure sliders, {found_slider_html} HTML "
          f"sliders, {found_still} explorer stills, each with its line")
    assert found_slider_png >= 1 and found_slider_html >= 1 and found_still >= 1, \
        (found_slider_png, found_slider_html, found_still)

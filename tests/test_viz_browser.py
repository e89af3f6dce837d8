"""The explorer in a real headless Chromium: sliders, select, keyboard, hover tooltip, row highlight,
escaping, several explorers (and copies of one) on a page, no console errors, no network requests.

Screenshots go to artifacts/screenshots/viz_*.png (git-ignored) for a human look.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

import pytest
import torch

from attnlib import viz

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts" / "screenshots"
EVIL = "<script>alert(1)</script>"
EVIL_IMG = "<img src=x onerror=\"window.__pwned=1\">"  # would run (and request x) if parsed as HTML

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402

CHROMIUM, CHROMEDRIVER = require_browser()

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

torch.set_num_threads(1)
TOKENS = ["The", "animal", "rested", "because", "it", "was", EVIL]


def _weights() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 7, 7, generator=g) * 2
    return torch.softmax(scores.masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(), float("-inf")), -1)


def _scores() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    out = []
    for t in (3, 5):
        s = torch.randn(2, t, t, generator=g) * 3
        out.append(s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf")))
    return out


W = _weights()
S = _scores()
EX_A = viz.attention_explorer(W, TOKENS, title="Toy attention <weights>")
EX_B = viz.explorer(S, [list("abc"), ["v", "w", "x", "y", EVIL_IMG]], dims=("head",),
                    examples=["short", "long"], value_name="score", diverging=True, title="Scores")


def expected(x: np.ndarray, digits: int = 3) -> list[str]:
    """What the page must show: round(value, digits) with exactly `digits` decimals; masked -inf."""
    out = []
    for v in np.asarray(x, dtype=np.float64).ravel():
        out.append("-inf" if v == -np.inf else f"{np.round(v * 10 ** digits) / 10 ** digits:.{digits}f}")
    return ["0.000" if s == "-0.000" else s for s in out]


@pytest.fixture(scope="module")
def driver():
    with chromium_driver("900,1000") as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    """A page with explorer A twice (the same output shown twice) and explorer B; checks after use."""
    html = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>viz test</title></head>"
            "<body style='max-width:720px;margin:12px auto;font-family:sans-serif'>"
            f"<div id='a1'>{EX_A._repr_html_()}</div><div id='b'>{EX_B._repr_html_()}</div>"
            f"<div id='a2'>{EX_A._repr_html_()}</div></body></html>")
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    driver.get_log("browser"), driver.get_log("performance")  # drop earlier entries
    driver.get(path.as_uri())
    yield driver
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    requests = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            requests.append(msg["params"]["request"]["url"])
    assert any(u.startswith("file://") for u in requests), requests  # the log does see the page load
    local = ("file:", "data:", "blob:", "about:", "chrome:", "chrome-extension:")  # chrome: is the browser's own UI
    assert [u for u in requests if not u.startswith(local)] == [], "requests left the page"
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # the <script> token never ran


def root(d, where: str):
    return d.find_element(By.CSS_SELECTOR, f"#{where} div.attnlib-explorer")


def cells(r) -> list:
    return r.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")


def values(r) -> list[str]:
    """Every cell's data-value in row-major order (one round trip, not one per cell)."""
    return r.parent.execute_script(
        "return Array.from(arguments[0].querySelectorAll('svg.attnlib-plot rect.attnlib-cell'),"
        " c => c.getAttribute('data-value'))", r)


def shot(d, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"viz_{name}.png"))


def test_every_copy_draws_and_ids_are_deterministic(page):
    for where in ("a1", "a2", "b"):
        r = root(page, where)
        assert r.get_attribute("data-attnlib-ready") == "1"
        assert r.find_elements(By.CSS_SELECTOR, ".attnlib-noscript") == []
        assert r.get_attribute("data-state").startswith("example=0;")
    ids = [root(page, where).get_attribute("id") for where in ("a1", "a2")]
    assert ids[0] != ids[1]  # one output shown twice: no repeated id (issue 10), both derived from its uid
    assert all(re.fullmatch(rf"attnlib-explorer-{EX_A.uid}(-\d+)?", i) for i in ids), ids
    assert values(root(page, "a1")) == expected(W[0, 0].numpy())
    assert values(root(page, "b")) == expected(S[0][0].numpy())
    shot(page, "initial")


def test_sliders_change_state_and_cells(page):
    r = root(page, "a1")
    layer, head = r.find_elements(By.CSS_SELECTOR, "input[type=range]")
    before_state, before_vals = r.get_attribute("data-state"), values(r)
    head.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)  # keyboard on the focused slider
    assert r.get_attribute("data-state") == "example=0;layer=0;head=2;row=-1" != before_state
    assert values(r) == expected(W[0, 2].numpy()) != before_vals
    layer.send_keys(Keys.ARROW_RIGHT)
    assert r.get_attribute("data-state") == "example=0;layer=1;head=2;row=-1"
    assert values(r) == expected(W[1, 2].numpy())
    assert [o.text for o in r.find_elements(By.CSS_SELECTOR, "output")] == ["1", "2"]
    assert values(root(page, "a2")) == expected(W[0, 0].numpy())  # the other copy is independent
    shot(page, "sliders")


def test_select_switches_example_with_other_length(page):
    r = root(page, "b")
    select = r.find_element(By.CSS_SELECTOR, "select")
    select.send_keys(Keys.ARROW_DOWN)  # keyboard picks "long"
    assert r.get_attribute("data-state") == "example=1;head=0;row=-1"
    assert len(cells(r)) == 25 and values(r) == expected(S[1][0].numpy())
    r.find_element(By.CSS_SELECTOR, "input[type=range]").send_keys(Keys.END)
    assert values(r) == expected(S[1][1].numpy())
    masked = [c for c in cells(r) if c.get_attribute("data-value") == "-inf"]
    assert len(masked) == 10 and all(c.get_attribute("fill").startswith("url(#attnlib-hatch-") for c in masked)
    live = {c.get_attribute("fill") for c in cells(r) if c.get_attribute("data-value") != "-inf"}
    assert all(f.startswith("#") for f in live) and len(live) > 3
    page.execute_script("arguments[0].scrollIntoView()", r)
    shot(page, "example_select")


def test_hover_tooltip_shows_exact_value_and_tokens(page):
    r = root(page, "a1")
    tip = r.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    assert not tip.is_displayed()
    i, j = 6, 4
    cell = cells(r)[i * 7 + j]
    ActionChains(page).move_to_element(cell).perform()
    assert tip.is_displayed()
    assert tip.find_element(By.CSS_SELECTOR, ".attnlib-value").text == expected(W[0, 0, i, j].numpy())[0]
    assert f"\u201c{EVIL}\u201d (6)" in tip.text and "\u201cit\u201d (4)" in tip.text
    shot(page, "tooltip")
    rb = root(page, "b")  # scores with -inf above the diagonal
    page.execute_script("arguments[0].scrollIntoView()", rb)
    ActionChains(page).move_to_element(cells(rb)[0 * 3 + 2]).perform()
    tip_b = rb.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    assert tip_b.find_element(By.CSS_SELECTOR, ".attnlib-value").text == "-\u221e (masked)"
    assert not tip.is_displayed()  # leaving explorer A hid its tooltip
    shot(page, "tooltip_masked")
    ActionChains(page).move_to_element(rb.find_element(By.CSS_SELECTOR, ".attnlib-title")).perform()
    assert not tip_b.is_displayed()


def test_click_row_label_highlights_row_and_lists_weights(page):
    r = root(page, "a1")
    label = r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")[4]
    label.click()
    assert r.get_attribute("data-state").endswith("row=4")
    assert "attnlib-selected" in label.get_attribute("class")
    box = r.find_element(By.CSS_SELECTOR, ".attnlib-rowbox")
    assert box.get_attribute("visibility") == "visible"
    assert float(box.get_attribute("y")) < float(cells(r)[4 * 7].get_attribute("y")) < float(box.get_attribute("y")) + 4
    bar_values = [b.text for b in r.find_elements(By.CSS_SELECTOR, ".attnlib-bar .attnlib-bar-value")]
    assert bar_values == [s if s != "-inf" else "-\u221e" for s in expected(W[0, 0, 4].numpy())]
    assert "\u201cit\u201d" in r.find_element(By.CSS_SELECTOR, ".attnlib-bars-head").text
    shot(page, "row_selected")
    cells(r)[2 * 7 + 1].click()  # clicking a cell selects its query row
    assert r.get_attribute("data-state").endswith("row=2")
    r.find_element(By.CSS_SELECTOR, "button").click()
    assert r.get_attribute("data-state").endswith("row=-1")


def test_keyboard_on_plot_and_row_labels(page):
    r = root(page, "a1")
    plot = r.find_element(By.CSS_SELECTOR, "svg.attnlib-plot")
    # the matrix is one tab stop (the arrows move inside it), not one per row label
    stops = page.execute_script("return Array.from(arguments[0].querySelectorAll('[tabindex]'))"
                                ".filter(e => e.tabIndex >= 0).length", plot)
    assert plot.get_attribute("tabindex") == "0" and stops == 0, f"{stops} tab stops besides the matrix"
    page.execute_script("arguments[0].focus()", plot)
    tip = r.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    assert tip.is_displayed() and tip.find_element(By.CSS_SELECTOR, ".attnlib-value").text == expected(W[0, 0, 0, 0].numpy())[0]
    ActionChains(page).send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ARROW_RIGHT).perform()
    assert tip.find_element(By.CSS_SELECTOR, ".attnlib-value").text == expected(W[0, 0, 3, 1].numpy())[0]
    ActionChains(page).send_keys(Keys.ENTER).perform()
    assert r.get_attribute("data-state").endswith("row=3")
    shot(page, "keyboard")
    ActionChains(page).send_keys(Keys.ESCAPE).perform()
    assert r.get_attribute("data-state").endswith("row=-1")
    labels = r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")
    page.execute_script("arguments[0].focus()", labels[1])
    ActionChains(page).send_keys(Keys.ARROW_DOWN, Keys.ENTER).perform()
    assert r.get_attribute("data-state").endswith("row=2")
    assert page.switch_to.active_element == labels[2]


def test_tokens_are_text_not_markup(page):
    r = root(page, "a1")
    assert r.find_elements(By.CSS_SELECTOR, "svg script, .attnlib-bars script") == []
    assert r.find_element(By.CSS_SELECTOR, ".attnlib-title").text == "Toy attention <weights>"
    label = r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")[6]
    assert label.find_element(By.CSS_SELECTOR, "title").get_attribute("textContent") == f"query 6: \u201c{EVIL}\u201d"
    rb = root(page, "b")
    Select(rb.find_element(By.CSS_SELECTOR, "select")).select_by_index(1)
    labels = rb.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")
    labels[4].click()
    assert rb.find_elements(By.CSS_SELECTOR, "img") == []
    assert EVIL_IMG in rb.find_element(By.CSS_SELECTOR, ".attnlib-bars-head").text
    assert page.execute_script("return typeof window.__pwned") == "undefined"


def test_inserted_like_jupyterlab(driver, tmp_path):
    """JupyterLab/Colab set innerHTML then re-create each <script>: the explorer must still draw."""
    path = tmp_path / "dyn.html"
    path.write_text("<!DOCTYPE html><html><body><div id='host'></div></body></html>", encoding="utf-8")
    driver.get_log("browser")
    driver.get(path.as_uri())
    driver.execute_script(
        """const host = document.getElementById('host'); host.innerHTML = arguments[0];
        host.querySelectorAll('script').forEach(old => { const s = document.createElement('script');
          for (const a of old.attributes) s.setAttribute(a.name, a.value);
          s.textContent = old.textContent; old.replaceWith(s); });""", EX_B._repr_html_())
    r = driver.find_element(By.CSS_SELECTOR, "#host div.attnlib-explorer")
    assert r.get_attribute("data-state") == "example=0;head=0;row=-1"
    assert values(r) == expected(S[0][0].numpy())
    # JupyterLab handles shortcuts on document (bubbling) and preventDefault()s keys it binds
    # (ArrowLeft/Right collapse headings, Enter edits a cell): the explorer must keep its keys.
    driver.execute_script(
        """window.__seen = []; document.addEventListener('keydown', e => {
             window.__seen.push(e.key); if (!e.ctrlKey) e.preventDefault(); });""")
    r.find_element(By.CSS_SELECTOR, "input[type=range]").send_keys(Keys.ARROW_RIGHT)
    assert r.get_attribute("data-state") == "example=0;head=1;row=-1"
    labels = r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")
    driver.execute_script("arguments[0].focus()", labels[1])
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    assert r.get_attribute("data-state") == "example=0;head=1;row=1"
    assert driver.execute_script("return window.__seen") == []
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_large_explorers_render_and_stay_readable(driver, tmp_path):
    """6 layers x 12 heads x 16 tokens (a BERT-size grid) and one 48-token head: every state reachable."""
    g = torch.Generator().manual_seed(2)
    big = torch.softmax(torch.randn(6, 12, 16, 16, generator=g) * 2, -1)
    words = ("[CLS] the quick brown fox jumps over the lazy dog while extraordinarily "
             "sleepy cats watch ##ing [SEP]").split()[:15] + ["[SEP]"]
    long = torch.softmax(torch.randn(1, 48, 48, generator=g) * 2, -1)
    ex_big = viz.attention_explorer(big, words, title="6 layers x 12 heads")
    ex_long = viz.explorer(long, [f"w{i}" for i in range(48)], dims=("head",), title="48 tokens")
    path = tmp_path / "big.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head>"
                    "<body style='max-width:720px;margin:12px auto;font-family:sans-serif'>"
                    f"<div id='big'>{ex_big._repr_html_()}</div><div id='long'>{ex_long._repr_html_()}</div>"
                    "</body></html>", encoding="utf-8")
    driver.get_log("browser")
    driver.get(path.as_uri())
    r = root(driver, "big")
    assert len(values(r)) == 256
    for s in r.find_elements(By.CSS_SELECTOR, "input[type=range]"):
        s.send_keys(Keys.END)
    assert r.get_attribute("data-state") == "example=0;layer=5;head=11;row=-1"
    assert values(r) == expected(big[5, 11].numpy())
    r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")[5].click()
    plot = r.find_element(By.CSS_SELECTOR, "svg.attnlib-plot")
    assert plot.size["width"] <= 720  # fits the book's column
    shot(driver, "large_grid")
    rl = root(driver, "long")
    assert len(values(rl)) == 48 * 48 and values(rl) == expected(long[0].numpy())
    driver.execute_script("arguments[0].scrollIntoView()", rl)
    ActionChains(driver).move_to_element(cells(rl)[47 * 48 + 47]).perform()
    assert rl.find_element(By.CSS_SELECTOR, ".attnlib-value").text == expected(long[0, 47, 47].numpy())[0]
    shot(driver, "long_sequence")
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_one_and_four_byte_payloads_decode_in_the_browser(driver, tmp_path):
    g = torch.Generator().manual_seed(3)
    small = torch.softmax(torch.randn(2, 4, 4, generator=g), -1)       # digits=1: 11 levels -> uint8
    wide = torch.randn(2, 4, 4, generator=g) * 1000                    # digits=3: span ~1e6 -> uint32
    wide[0, 0, 3] = float("-inf")
    ex8 = viz.explorer(small, list("abcd"), dims=("head",), digits=1)
    ex32 = viz.explorer(wide, list("abcd"), dims=("head",), diverging=True, value_name="score")
    assert (ex8.payload["examples"][0]["bytes"], ex32.payload["examples"][0]["bytes"]) == (1, 4)
    signed = viz.explorer(wide[1] / 1000, list("abcd"), value_name="score")  # not diverging, vmin < 0
    path = tmp_path / "bytes.html"
    path.write_text(f"<!DOCTYPE html><html><body><div id='u8'>{ex8._repr_html_()}</div>"
                    f"<div id='u32'>{ex32._repr_html_()}</div><div id='signed'>{signed._repr_html_()}</div>"
                    "</body></html>", encoding="utf-8")
    driver.get_log("browser")
    driver.get(path.as_uri())
    for where, x, digits in (("u8", small, 1), ("u32", wide, 3)):
        r = root(driver, where)
        assert values(r) == expected(x[0].numpy(), digits)
        r.find_element(By.CSS_SELECTOR, "input[type=range]").send_keys(Keys.ARROW_RIGHT)
        assert values(r) == expected(x[1].numpy(), digits)
    # bar lengths: position in [vmin, vmax]; on a diverging scale |v| / max|v|
    for where, ex, row, diverging in (("u8", ex8, small[1, 2], False), ("signed", signed, wide[1, 2] / 1000, False),
                                      ("u32", ex32, wide[1, 2], True)):
        r = root(driver, where)
        driver.execute_script("arguments[0].scrollIntoView()", r)
        r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")[2].click()
        widths = driver.execute_script(
            "return Array.from(arguments[0].querySelectorAll('.attnlib-bar-fill'), b => parseFloat(b.style.width))", r)
        lo, hi, d = ex.payload["vmin"], ex.payload["vmax"], ex.payload["digits"]
        v = np.round(row.double().numpy() * 10 ** d) / 10 ** d
        want = np.abs(v) / max(-lo, hi) if diverging else (v - lo) / (hi - lo)
        np.testing.assert_allclose(widths, 100 * np.clip(want, 0, 1), atol=0.051)
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_still_picture_where_scripts_do_not_run(driver, tmp_path):
    """With scripts off (GitHub's notebook view, an untrusted notebook) the explorer shows its first
    state as a picture; with scripts on, the picture is gone and the live matrix replaces it."""
    path = tmp_path / "still.html"
    EX_B.save(path)
    cells = len(EX_B.payload["examples"][0]["rows"]) * len(EX_B.payload["examples"][0]["cols"])
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(path.as_uri())
        still = driver.find_element("css selector", "div.attnlib-explorer .attnlib-noscript")
        assert still.is_displayed() and "Scripts do not run here" in still.text
        assert len(still.find_elements("css selector", "svg.attnlib-static rect")) == cells
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / "viz_still_noscript.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    driver.get(path.as_uri())
    root = driver.find_element("css selector", "div.attnlib-explorer")
    assert root.find_elements("css selector", ".attnlib-noscript") == []
    assert root.find_elements("css selector", "svg.attnlib-plot")


def test_explorer_opens_on_its_initial_state(driver, tmp_path):
    """initial={dim: label}: the sliders, their read-outs, data-state and the cells start there,
    and moving a slider still works from it."""
    ex = viz.explorer(W, TOKENS, dims=("layer", "head"), initial={"layer": 1, "head": 2})
    path = tmp_path / "initial.html"
    ex.save(path)
    driver.get(path.as_uri())
    r = driver.find_element(By.CSS_SELECTOR, "div.attnlib-explorer")
    assert r.get_attribute("data-state") == "example=0;layer=1;head=2;row=-1"
    layer, head = r.find_elements(By.CSS_SELECTOR, "input[type=range]")
    assert (layer.get_attribute("value"), head.get_attribute("value")) == ("1", "2")
    assert [o.text for o in r.find_elements(By.CSS_SELECTOR, "output")] == ["1", "2"]
    assert values(r) == expected(W[1, 2].numpy())
    head.send_keys(Keys.ARROW_LEFT)
    assert r.get_attribute("data-state") == "example=0;layer=1;head=1;row=-1"
    assert values(r) == expected(W[1, 1].numpy())
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_axis_names_reach_titles_tooltip_and_row_panel(driver, tmp_path):
    """An explorer given axis_names=(rows, columns) says them wherever it would say query and
    key: the axis titles, a cell's tooltip, the row panel (chapter 12's block pool)."""
    data = torch.rand(2, 3, 4)
    ex = viz.explorer(data, ["0-3", "4-7", "8-11"], [f"+{c}" for c in range(4)],
                      dims=("step",), axis_names=("blocks", "offset"), value_name="sequence")
    path = tmp_path / "axes.html"
    path.write_text(ex.to_html(full_page=True), encoding="utf-8")
    driver.get_log("browser")
    driver.get(path.as_uri())
    r = driver.find_element(By.CSS_SELECTOR, "div.attnlib-explorer")
    axes = [t.text for t in r.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot .attnlib-axis")]
    assert axes == ["offset", "blocks"], axes
    ActionChains(driver).move_to_element(cells(r)[1 * 4 + 3]).perform()
    tip = r.find_element(By.CSS_SELECTOR, ".attnlib-tooltip").text
    assert "blocks \u201c4-7\u201d (1) \u2192 offset \u201c+3\u201d (3)" in tip, tip
    assert "query" not in tip and "key" not in tip
    r.find_elements(By.CSS_SELECTOR, ".attnlib-rowlabel")[2].click()
    head = r.find_element(By.CSS_SELECTOR, ".attnlib-bars-head").text
    assert head.startswith("blocks \u201c8-11\u201d") and head.endswith("for each offset")
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []

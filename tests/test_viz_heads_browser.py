"""The heads grid (viz.heads_grid) in a real headless Chromium: every thumbnail draws its head's
weights (read back from the canvas), the enlarged head's cells hold the numbers the payload holds
(which are attnlib's, rounded), a click enlarges a head and a second click closes it, hovering a
thumbnail reads the weight under the pointer, following a query row dims the other rows of every
head, the keyboard moves through the grid, text legible at 390 px, still picture, escaping.

Screenshots go to artifacts/screenshots/heads_*.png (git-ignored).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attnlib
from attnlib import viz
from attnlib.viz import decode_payload

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import EVIL, JS_LAYOUT, check_clean, open_page, shot, state, write_page  # noqa: E402

require_browser()

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

torch.manual_seed(0)
CFG = attnlib.TransformerConfig(vocab_size=20, d_model=16, n_heads=4, n_layers=3, max_len=16)
MODEL = attnlib.GPT(CFG).eval()
IDS = [torch.tensor([[1, 5, 7, 2, 9, 3]]), torch.tensor([[4, 4, 8, 1, 0, 6, 2, 11]])]
with torch.no_grad():
    ATT = [MODEL(ids, need_weights=True).attentions for ids in IDS]
TOKS = [[f"t{int(i)}" for i in ids[0]] for ids in IDS]
GRID = viz.heads_grid(ATT, TOKS, examples=["six tokens", "eight tokens"], title="Every head", head=(1, 2))


@pytest.fixture(scope="module")
def driver():
    with chromium_driver() as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    open_page(driver, write_page(tmp_path / "heads.html", [GRID]), 1000)
    root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-heads")
    yield driver, root
    check_clean(driver)


def enlarged(d, root) -> np.ndarray:
    cells = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")
    return np.array([float(c.get_attribute("data-value")) for c in cells])


def test_numbers_are_attnlibs(page):
    d, root = page
    assert state(root)["open"] == "1,2"
    for ex in range(2):
        Select(root.find_element(By.CSS_SELECTOR, "select")).select_by_index(ex)
        want = torch.stack([a[0] for a in ATT[ex]]).numpy()                # (L, H, T, T) from attnlib
        stored = decode_payload(GRID.payload, ex)
        assert np.abs(stored - want).max() <= 0.5e-3 + 1e-9                 # 3 decimals kept
        np.testing.assert_allclose(enlarged(d, root), stored[1, 2].ravel(), atol=1e-9)
        # every thumbnail draws its own head: the canvas colour of cell (i, j) is the palette's
        # colour of that head's weight (checked on a few cells of every head)
        got = d.execute_script("""
            var root = arguments[0], T = arguments[1], out = [];
            root.querySelectorAll('button.attnlib-heads-thumb').forEach(function (b) {
              var c = b.querySelector('canvas'), g = c.getContext('2d'), px = c.width / T, row = [];
              [[0, 0], [T - 1, 0], [T - 1, T - 1], [2, 1]].forEach(function (ij) {
                var p = g.getImageData(Math.floor((ij[1] + 0.5) * px), Math.floor((ij[0] + 0.5) * px), 1, 1).data;
                row.push([p[0], p[1], p[2]]);
              });
              out.push([+b.getAttribute('data-layer'), +b.getAttribute('data-head'), row]);
            });
            return out;""", root, len(TOKS[ex]))
        pal = GRID.payload["palette"]
        T = len(TOKS[ex])
        assert len(got) == CFG.n_layers * CFG.n_heads
        for l, h, pixels in got:
            for (i, j), rgb in zip([(0, 0), (T - 1, 0), (T - 1, T - 1), (2, 1)], pixels):
                v = stored[l, h, i, j]
                k = min(255, int(np.floor(v * 256)))
                want_rgb = [int(pal[6 * k + 2 * c: 6 * k + 2 * c + 2], 16) for c in range(3)]
                assert np.abs(np.array(rgb) - want_rgb).max() <= 2, (l, h, i, j, rgb, want_rgb)


def test_click_enlarges_and_closes(page):
    d, root = page
    thumb = root.find_element(By.CSS_SELECTOR, "button.attnlib-heads-thumb[data-layer='2'][data-head='0']")
    thumb.click()
    assert state(root)["open"] == "2,0" and thumb.get_attribute("aria-pressed") == "true"
    assert root.find_element(By.CSS_SELECTOR, ".attnlib-heads-bighead").text.startswith("layer 2, head 0")
    np.testing.assert_allclose(enlarged(d, root), decode_payload(GRID.payload, 0)[2, 0].ravel(), atol=1e-9)
    others = root.find_elements(By.CSS_SELECTOR, "button.attnlib-heads-thumb[aria-pressed='true']")
    assert others == [thumb]
    thumb.click()
    assert state(root)["open"] == "none" and thumb.get_attribute("aria-pressed") == "false"
    assert root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot") == []
    thumb.click()
    assert state(root)["open"] == "2,0"


def test_hover_and_follow_a_row(page):
    d, root = page
    thumb = root.find_element(By.CSS_SELECTOR, "button.attnlib-heads-thumb[data-layer='0'][data-head='3']")
    canvas = thumb.find_element(By.CSS_SELECTOR, "canvas")
    T = len(TOKS[0])
    px = canvas.size["width"] / T
    # the cell (query 4, key 1): offsets from the canvas centre
    ActionChains(d).move_to_element_with_offset(canvas, int((1.5 - T / 2) * px), int((4.5 - T / 2) * px)).perform()
    tip = root.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    v = decode_payload(GRID.payload, 0)[0, 3, 4, 1]
    assert tip.is_displayed() and f"= {v:.3f}" in tip.text and "\u201ct9\u201d \u2192 key \u201ct5\u201d" in tip.text, tip.text
    label = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot .attnlib-rowlabel")[3]
    label.click()
    assert state(root)["row"] == "3"
    assert "\u201ct2\u201d" in root.find_element(By.CSS_SELECTOR, ".attnlib-heads-hint").text
    # other rows of every thumbnail are dimmed: their pixels are lighter than the drawn colour
    dim = d.execute_script("""
        var c = arguments[0].querySelector('button.attnlib-heads-thumb canvas'), g = c.getContext('2d'), px = c.width / arguments[1];
        var p = g.getImageData(Math.floor(0.5 * px), Math.floor(0.5 * px), 1, 1).data;
        var q = g.getImageData(Math.floor(0.5 * px), Math.floor(3.5 * px), 1, 1).data;
        return [p[3], q[3]];""", root, T)
    assert dim[0] < 100 and dim[1] == 255      # row 0 faded (alpha), the followed row 3 opaque
    root.find_element(By.CSS_SELECTOR, "button.attnlib-clear").click()
    assert state(root)["row"] == "-1"


def test_keyboard(page):
    d, root = page
    start = root.find_element(By.CSS_SELECTOR, "button.attnlib-heads-thumb[tabindex='0']")
    assert (start.get_attribute("data-layer"), start.get_attribute("data-head")) == ("1", "2")
    assert len(root.find_elements(By.CSS_SELECTOR, "button.attnlib-heads-thumb[tabindex='0']")) == 1
    d.execute_script("arguments[0].focus()", start)
    start.send_keys(Keys.ARROW_DOWN)
    d.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    d.switch_to.active_element.send_keys(Keys.ENTER)
    assert state(root)["open"] == "2,3"
    assert d.switch_to.active_element.get_attribute("data-head") == "3"
    for b in root.find_elements(By.CSS_SELECTOR, "button"):
        assert (b.get_attribute("aria-label") or b.text).strip()


def test_legible_at_390_still_and_escaping(driver, tmp_path):
    evil = viz.heads_grid(torch.softmax(torch.randn(1, 2, 2, 2), -1), [EVIL, "b"], title=EVIL)
    path = write_page(tmp_path / "phone.html", [GRID, evil])
    for width in (390, 1280):
        open_page(driver, path, width, 1000)
        root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-heads")
        lay = driver.execute_script(JS_LAYOUT, root)
        assert lay["smallest"] >= 11 and lay["pageOverflow"] <= 0 and lay["outside"] == [], lay
        shot(driver, f"heads_{width}")
    other = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-heads")[1]
    assert other.find_element(By.CSS_SELECTOR, ".attnlib-title").text == EVIL and other.find_elements(By.CSS_SELECTOR, "img") == []
    check_clean(driver)
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(write_page(tmp_path / "still.html", [GRID]).as_uri())
        still = driver.find_element(By.CSS_SELECTOR, "div.attnlib-heads .attnlib-noscript")
        assert "all 12 heads" in still.text and "layer 1, head 2" in still.text
        assert len(still.find_elements(By.CSS_SELECTOR, "svg rect")) == 36
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})

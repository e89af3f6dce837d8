"""The vector explorer (viz.vector_explorer) in a real headless Chromium: its starting numbers,
and every number after the reader types, drags, changes d_k, switches the scaling, adds or removes
a key, equal attnlib.scaled_dot_product_attention on the same vectors (float64, 1e-12); the page
shows them rounded as attnlib's; the controls are keyboard-operable with accessible names; text
stays legible at 390 px; a still picture where scripts do not run; copies on one page; escaping.

Screenshots go to artifacts/screenshots/vectors_*.png (git-ignored).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnlib
from attnlib import viz
from attnlib.viz.vectors import first_numbers

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import EVIL, JS_LAYOUT, check_clean, open_page, shot, state, write_page  # noqa: E402

require_browser()

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

TOL = 1e-12
# chapter 4's worked numbers: one score by hand (q . k = 1, / sqrt(3) = 0.577) and the row of "it"
# whose weights 0.03, 0.62, ... mix the values into [0.62, 0.47]
WEIGHTS = torch.tensor([0.03, 0.62, 0.08, 0.05, 0.12, 0.04, 0.06], dtype=torch.float64)
VALUES = torch.tensor([[0.2, 0.6], [0.8, 0.3], [0.2, 0.9], [0.4, 1.0], [0.4, 0.5], [0.1, 0.6], [0.5, 1.0]],
                      dtype=torch.float64)
Q_IT = torch.tensor([1.5, -0.5], dtype=torch.float64)
KEYS = ((torch.log(WEIGHTS) + 3.0) * math.sqrt(2) / (Q_IT @ Q_IT))[:, None] * Q_IT + \
    torch.tensor([-2.2, 1.0, 2.6, -0.9, 0.3, -2.9, 1.9], dtype=torch.float64)[:, None] * torch.tensor([0.2, 0.6], dtype=torch.float64)
TOKENS = ["The", "animal", "rested", "because", "it", "was", "tired"]
EX = viz.vector_explorer([Q_IT, [2.0, -1.0, 0.5]], [KEYS, [[1.0, 3.0, 4.0]]], [VALUES, None],
                         key_tokens=[TOKENS, ["k"]], query_token=["it", "q"],
                         examples=['what does "it" collect?', "one score by hand"], title="Your own vectors")


def reference(st: dict) -> dict:
    """attnlib on the page's current vectors."""
    q = torch.tensor([st["q"]], dtype=torch.float64)
    K = torch.tensor(st["K"], dtype=torch.float64)
    V = torch.tensor(st["V"], dtype=torch.float64) if st["V"] else torch.zeros(len(st["K"]), 1, dtype=torch.float64)
    out, w = attnlib.scaled_dot_product_attention(q, K, V, scale=None if st["scaled"] else 1.0, need_weights=True)
    dots = (q @ K.T)[0]
    return {"dots": dots.numpy(), "scores": dots.numpy() * ((1 / math.sqrt(q.shape[1])) if st["scaled"] else 1),
            "weights": w[0].numpy(), "out": out[0].numpy() if st["V"] else None}


def assert_equal_to_attnlib(d, root) -> dict:
    st = d.execute_script("return arguments[0].attnlibVectors.state()", root)
    got = d.execute_script("return arguments[0].attnlibVectors.numbers()", root)
    want = reference(st)
    for k in ("dots", "scores", "weights"):
        np.testing.assert_allclose(got[k], want[k], atol=TOL, rtol=0)
    if st["V"]:
        np.testing.assert_allclose(got["out"], want["out"], atol=TOL, rtol=0)
        shown = root.find_element(By.CSS_SELECTOR, ".attnlib-vectors-o").text
        assert shown == "[" + ", ".join(f"{x:.3f}" for x in want["out"]) + "]"
    # the table and the heatmap show attnlib's numbers, rounded
    rows = root.find_elements(By.CSS_SELECTOR, "table.attnlib-vectors-results tr")[1:]
    assert len(rows) == len(st["K"])
    for j, row in enumerate(rows):
        cells = row.find_elements(By.CSS_SELECTOR, "td")
        assert cells[0].text == f"{want['dots'][j]:.3f}".replace("-0.000", "0.000")
        assert cells[1].text == f"{want['scores'][j]:.3f}".replace("-0.000", "0.000")
    values = [float(c.get_attribute("data-value")) for c in root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")]
    np.testing.assert_allclose(values, np.round(want["weights"], 3), atol=1e-9)
    return st


@pytest.fixture(scope="module")
def driver():
    with chromium_driver() as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    open_page(driver, write_page(tmp_path / "vectors.html", [EX]), 1000)
    root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-vectors")
    yield driver, root
    check_clean(driver)


def test_starting_states_are_attnlib_and_the_book(page):
    d, root = page
    assert root.get_attribute("data-attnlib-ready") == "1"
    st = assert_equal_to_attnlib(d, root)
    np.testing.assert_allclose(first_numbers(EX, 0)["weight"], WEIGHTS.numpy(), atol=1e-6)
    assert root.find_element(By.CSS_SELECTOR, ".attnlib-vectors-o").text == "[0.620, 0.470]"
    assert st["scaled"] is True and len(st["q"]) == 2
    shot(d, "vectors_it")
    Select(root.find_element(By.CSS_SELECTOR, "select")).select_by_index(1)
    assert state(root)["example"] == "1" and state(root)["dk"] == "3"
    assert_equal_to_attnlib(d, root)
    cells = root.find_elements(By.CSS_SELECTOR, "table.attnlib-vectors-results tr")[1].find_elements(By.CSS_SELECTOR, "td")
    assert (cells[0].text, cells[1].text) == ("1.000", "0.577")        # q . k = 1, / sqrt(3) = 0.577
    assert not root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plane")  # no plane in 3-D


def test_typing_recomputes(page):
    d, root = page
    before = state(root)["numbers"]
    q0 = root.find_element(By.CSS_SELECTOR, "input[aria-label='query it, component 1']")
    q0.send_keys(Keys.CONTROL, "a")
    q0.send_keys("-0.75")
    assert state(root)["numbers"] != before
    st = assert_equal_to_attnlib(d, root)
    assert st["q"][0] == -0.75
    v = root.find_element(By.CSS_SELECTOR, "input[aria-label='value animal, component 2']")
    v.send_keys(Keys.CONTROL, "a")
    v.send_keys("3")
    assert assert_equal_to_attnlib(d, root)["V"][1][1] == 3
    # not a number: ignored until it is one, restored on leaving the box
    v.send_keys(Keys.CONTROL, "a")
    v.send_keys("-")
    assert assert_equal_to_attnlib(d, root)["V"][1][1] == 3
    v.send_keys(Keys.TAB)
    assert v.get_attribute("value") == "3"
    reset = root.find_element(By.CSS_SELECTOR, "button.attnlib-vectors-reset")
    assert reset.is_enabled()
    reset.click()
    assert not reset.is_enabled() and root.find_element(By.CSS_SELECTOR, ".attnlib-vectors-o").text == "[0.620, 0.470]"


def test_dragging_and_arrow_keys_move_the_vectors(page):
    d, root = page
    q = root.find_element(By.CSS_SELECTOR, "svg.attnlib-plane circle.attnlib-handle.attnlib-q")
    before = d.execute_script("return arguments[0].attnlibVectors.state()", root)
    ActionChains(d).click_and_hold(q).move_by_offset(-40, -30).move_by_offset(-10, -10).release().perform()
    after = assert_equal_to_attnlib(d, root)
    assert after["q"][0] < before["q"][0] - 0.3 and after["q"][1] > before["q"][1] + 0.3   # left and up
    shot(d, "vectors_dragged")
    key = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plane circle.attnlib-handle.attnlib-k")[1]  # animal
    assert "key animal" in key.get_attribute("aria-label") and key.get_attribute("tabindex") == "0"
    x0 = after["K"][1][0]
    key.send_keys(Keys.ARROW_RIGHT)
    key.send_keys(Keys.ARROW_RIGHT)
    st = assert_equal_to_attnlib(d, root)
    assert abs(st["K"][1][0] - (x0 + 0.2)) < 1e-9
    assert d.execute_script("return document.activeElement.getAttribute('aria-label')").startswith("key animal")
    val = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plane circle.attnlib-handle.attnlib-v")[0]
    val.send_keys(Keys.SHIFT, Keys.ARROW_UP)
    assert abs(assert_equal_to_attnlib(d, root)["V"][0][1] - 0.61) < 1e-9


def test_dk_and_the_scaling_are_separate_controls(page):
    d, root = page
    dots = d.execute_script("return arguments[0].attnlibVectors.numbers()", root)["dots"]
    dk = root.find_element(By.CSS_SELECTOR, "input[type=range]")
    assert "d_k" in dk.get_attribute("aria-label")
    dk.send_keys(Keys.ARROW_RIGHT)                      # d_k 2 -> 3: a new component 0 in q and k
    st = assert_equal_to_attnlib(d, root)
    assert len(st["q"]) == 3 and st["q"][2] == 0 and all(k[2] == 0 for k in st["K"])
    got = d.execute_script("return arguments[0].attnlibVectors.numbers()", root)
    np.testing.assert_allclose(got["dots"], dots, atol=TOL)                       # the same dot products
    np.testing.assert_allclose(got["scores"], np.array(dots) / math.sqrt(3), atol=TOL)  # divided by sqrt(3)
    assert not root.find_elements(By.CSS_SELECTOR, "svg.attnlib-vectors-qk, .attnlib-vectors-qk svg")
    scale = root.find_element(By.CSS_SELECTOR, "button.attnlib-vectors-scale")
    assert scale.get_attribute("aria-pressed") == "true"
    scale.send_keys(Keys.ENTER)
    assert scale.get_attribute("aria-pressed") == "false" and state(root)["scaled"] == "0"
    got = d.execute_script("return arguments[0].attnlibVectors.numbers()", root)
    np.testing.assert_allclose(got["scores"], dots, atol=TOL)                     # not scaled: the raw dots
    assert_equal_to_attnlib(d, root)
    assert "softmax\u2c7c(q\u00b7k\u2c7c)" in root.find_element(By.CSS_SELECTOR, ".attnlib-vectors-formula").text
    dk.send_keys(Keys.HOME)
    assert len(assert_equal_to_attnlib(d, root)["q"]) == 1


def test_keys_added_removed_and_selected(page):
    d, root = page
    add, rm = (root.find_element(By.CSS_SELECTOR, f"button.attnlib-vectors-{n}") for n in ("add", "del"))
    add.click()
    st = assert_equal_to_attnlib(d, root)
    assert len(st["K"]) == 8 and st["K"][7] == [0, 0] and st["V"][7] == [0, 0]
    assert not add.is_enabled()                                   # at most 8 keys
    assert state(root)["key"] == "7"                              # the new key is selected
    cell = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")[1]
    ActionChains(d).move_to_element(cell).click().perform()
    assert state(root)["key"] == "1"
    tip = root.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    assert tip.is_displayed() and "animal" in tip.text and "weight = " in tip.text
    # the readout sits below the drawing's top, never over the controls above it
    controls = root.find_element(By.CSS_SELECTOR, ".attnlib-controls").rect
    assert tip.rect["y"] >= controls["y"] + controls["height"]
    rm.click()                                                     # removes the selected key
    st = assert_equal_to_attnlib(d, root)
    assert len(st["K"]) == 7 and "animal" not in root.find_element(By.CSS_SELECTOR, "table.attnlib-vectors-results").text


def test_keyboard_reaches_every_control(page):
    d, root = page
    d.execute_script("var a = document.createElement('button'); a.textContent = 'before';"
                     "document.body.insertBefore(a, document.body.firstChild); a.focus();")
    seen = []
    for _ in range(60):
        d.switch_to.active_element.send_keys(Keys.TAB)
        el = d.switch_to.active_element
        if not d.execute_script("return arguments[0].contains(document.activeElement)", root):
            break
        name = el.get_attribute("aria-label") or el.text or el.get_attribute("value")
        assert name, el.get_attribute("outerHTML")[:120]                # every stop has a name
        seen.append(el.tag_name + ":" + (el.get_attribute("class") or ""))
    assert any("select" in s for s in seen) and any("attnlib-vectors-scale" in s for s in seen), seen
    assert any("attnlib-handle" in s for s in seen) and any("attnlib-plot" in s for s in seen)
    assert sum("attnlib-vectors-num" in s for s in seen) >= 10
    svg = root.find_element(By.CSS_SELECTOR, "svg.attnlib-plot")
    d.execute_script("arguments[0].focus()", svg)
    svg.send_keys(Keys.ARROW_RIGHT, Keys.ENTER)
    assert state(root)["key"] == "1"


def test_legible_at_390_and_dark(driver, tmp_path):
    path = write_page(tmp_path / "phone.html", [EX])
    for width in (390, 1280):
        open_page(driver, path, width, 900)
        root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-vectors")
        lay = driver.execute_script(JS_LAYOUT, root)
        assert lay["smallest"] >= 11, lay        # cell values and ticks 11 px, every other label 12 px
        assert lay["pageOverflow"] <= 0 and lay["outside"] == [], lay
        shot(driver, f"vectors_{width}")
    driver.execute_script("document.documentElement.setAttribute('data-theme', 'dark');"
                          "document.body.style.background = '#121212'; document.body.style.color = '#ddd';")
    bg = driver.execute_script("return getComputedStyle(arguments[0]).backgroundColor",
                               root.find_element(By.CSS_SELECTOR, "input.attnlib-vectors-num"))
    assert bg == "rgb(36, 39, 45)", bg
    shot(driver, "vectors_dark")
    check_clean(driver)


def test_still_picture_copies_and_escaping(driver, tmp_path):
    evil = viz.vector_explorer([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], key_tokens=[EVIL, "b"], query_token=EVIL, title=EVIL)
    path = write_page(tmp_path / "two.html", [EX, evil, EX])
    ids = [r for r in (EX._repr_html_(), EX._repr_html_())]
    assert 'id="attnlib-vectors-' + EX.uid + '-' in ids[1]         # a copy gets -2, -3, ...
    open_page(driver, path)
    roots = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-vectors")
    assert len(roots) == 3 and len({r.get_attribute("id") for r in roots}) == 3
    assert all(r.get_attribute("data-attnlib-ready") == "1" for r in roots)
    roots[0].find_element(By.CSS_SELECTOR, "button.attnlib-vectors-scale").click()
    assert state(roots[0])["scaled"] == "0" and state(roots[2])["scaled"] == "1"
    assert roots[1].find_element(By.CSS_SELECTOR, ".attnlib-title").text == EVIL
    assert roots[1].find_elements(By.CSS_SELECTOR, "img") == []
    check_clean(driver)
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(write_page(tmp_path / "still.html", [EX]).as_uri())
        still = driver.find_element(By.CSS_SELECTOR, "div.attnlib-vectors .attnlib-noscript")
        assert "Scripts do not run here" in still.text and "output o = [0.620, 0.470]" in still.text
        assert "0.620" in still.text and "animal" in still.text
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


def test_out_of_range_numbers_are_refused_visibly(page):
    """Issue 44: 1e308 typed into a box overflowed the arithmetic (q . k = Infinity, weights NaN):
    a script error, and the tables kept the previous numbers. A number outside the range the page
    edits is refused: the box is marked invalid with a message naming the range, every number on
    the page stays attnlib's on the vectors in use, and leaving the box brings their value back."""
    d, root = page
    box = root.find_element(By.CSS_SELECTOR, "input[aria-label='query it, component 1']")
    # typed key by key, as a reader types: the last number in range on the way is the one in use
    for typed, in_use in (("1e308", 1000), ("-1e308", -1000), ("1001", 100), ("1e400", 1)):
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(typed)
        assert box.get_attribute("aria-invalid") == "true", typed
        note = d.find_element(By.ID, box.get_attribute("aria-describedby"))
        assert note.is_displayed() and "\u22121000 to 1000" in note.text, (typed, note.text)
        assert assert_equal_to_attnlib(d, root)["q"][0] == in_use, typed   # nothing computed from it
    shot(d, "vectors_refused")
    box.send_keys(Keys.TAB)
    assert box.get_attribute("value") == "1" and box.get_attribute("aria-invalid") != "true"
    assert not d.find_element(By.ID, box.get_attribute("aria-describedby")).is_displayed()
    # the ends of the range compute (a saturated softmax), and a handle stops at them
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("-1000", Keys.TAB)                       # leaving the box refits the planes
    assert box.get_attribute("aria-invalid") != "true"
    assert assert_equal_to_attnlib(d, root)["q"][0] == -1000
    q = root.find_element(By.CSS_SELECTOR, "svg.attnlib-plane circle.attnlib-handle.attnlib-q")
    q.send_keys(Keys.ARROW_LEFT)
    assert assert_equal_to_attnlib(d, root)["q"][0] == -1000

"""The mask explorer (viz.mask_explorer) in a real headless Chromium: the weights the page computes
from the clicked mask equal attnlib.scaled_dot_product_attention under the same mask (float64,
1e-12), fully masked rows included (zeros, and the page says a plain softmax would give NaN); each
convention button writes the mask as attnlib.masks does (SDPA bool, additive 0/-inf,
nn.MultiheadAttention's True = blocked, HF's per-key 1/0 plus the model's causal part) and the
weights computed from that form are attnlib's; aria-pressed on every toggle; the keyboard alone
works; legible at 390 px; a still picture where scripts do not run; escaping.

Screenshots go to artifacts/screenshots/mask_*.png (git-ignored).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import attnlib
from attnlib import masks, viz

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402
from _viz_pages import EVIL, JS_LAYOUT, check_clean, open_page, shot, state, write_page  # noqa: E402

require_browser()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

TOL = 1e-12
G = torch.Generator().manual_seed(5)
TOKENS = [["The", "cat", "slept", "."], ["Birds", "fly", "<PAD>"], ["<PAD>", "Birds", "fly"]]
QS = [torch.randn(len(t), 4, generator=G, dtype=torch.float64) for t in TOKENS]
KS = [torch.randn(len(t), 4, generator=G, dtype=torch.float64) for t in TOKENS]
EX = viz.mask_explorer(QS, KS, TOKENS, pad="<PAD>", causal=[True, False, True],
                       examples=["causal", "padding", "left padding + causal"], title="A mask you click")


@pytest.fixture(scope="module")
def driver():
    with chromium_driver() as d:
        yield d


@pytest.fixture()
def page(driver, tmp_path):
    open_page(driver, write_page(tmp_path / "mask.html", [EX]), 1000)
    root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-mask")
    yield driver, root
    check_clean(driver)


def page_mask(d, root) -> torch.Tensor:
    """The mask the page's weights were computed under (True = may attend), from its data-state."""
    st = state(root)
    T = len(TOKENS[int(st["example"])])
    return torch.tensor([c == "1" for c in st["mask"]]).view(T, T)


def reference(example: int, allowed: torch.Tensor) -> np.ndarray:
    """attnlib on the numbers the page holds (the payload keeps 6 decimals of q and k)."""
    st = EX.payload["examples"][example]
    q, k = (torch.tensor(st[n], dtype=torch.float64) for n in ("q", "k"))
    assert (q - QS[example]).abs().max() <= 1e-6
    _, w = attnlib.scaled_dot_product_attention(q, k, k, attn_mask=allowed, need_weights=True)
    return w.numpy()


def page_weights(d, root, T: int) -> np.ndarray:
    return np.array(d.execute_script("return arguments[0].attnlibMask.weights()", root)).reshape(T, T)


def check(d, root, allowed: torch.Tensor) -> np.ndarray:
    """The page's weights are attnlib's under `allowed`; the cells show them rounded."""
    ex = int(state(root)["example"])
    T = len(TOKENS[ex])
    want = reference(ex, allowed)
    np.testing.assert_allclose(page_weights(d, root, T), want, atol=TOL, rtol=0)
    shown = [float(c.get_attribute("data-value")) for c in root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot rect.attnlib-cell")]
    np.testing.assert_allclose(shown, np.round(want, 3).ravel(), atol=1e-9)
    dead = (~allowed.any(-1)).tolist()
    assert d.execute_script("return arguments[0].attnlibMask.dead()", root) == dead
    assert (want[dead] == 0).all()
    return want


def cell(root, i: int, j: int):
    return root.find_element(By.CSS_SELECTOR, f"button.attnlib-mask-cell[data-row='{i}'][data-col='{j}']")


def test_starting_masks_are_attnlib(page):
    d, root = page
    sel = Select(root.find_element(By.CSS_SELECTOR, "select"))
    for ex in range(3):
        sel.select_by_index(ex)
        T = len(TOKENS[ex])
        pad = torch.tensor([t == "<PAD>" for t in TOKENS[ex]])
        base = attnlib.causal_mask(T) if ex != 1 else torch.ones(T, T, dtype=torch.bool)
        want = base & attnlib.padding_mask(pad[None].long(), 1)[0, 0]   # pad id 1 marks the padding
        assert torch.equal(page_mask(d, root), want)
        check(d, root, want)
    # left padding + causal: the first query has no key at all -> zeros, and the page says why
    assert state(root)["dead"] == "1"
    note = root.find_element(By.CSS_SELECTOR, ".attnlib-mask-dead").text
    assert "\u201c<PAD>\u201d" in note and "NaN" in note and "zeros" in note
    labels = root.find_elements(By.CSS_SELECTOR, "svg.attnlib-plot text.attnlib-dead")
    assert len(labels) == 1 and labels[0].text.startswith("<PAD>")
    shot(d, "mask_left_padding")


def test_clicked_cells_recompute_the_weights(page):
    d, root = page
    allowed = attnlib.causal_mask(4).clone()
    for i, j in [(0, 1), (3, 0), (2, 2), (1, 0), (1, 1)]:   # the last two leave query 1 with no key
        b = cell(root, i, j)
        was = b.get_attribute("aria-pressed")
        b.click()
        allowed[i, j] = ~allowed[i, j]
        assert b.get_attribute("aria-pressed") != was          # the same element, updated in place
        assert b.get_attribute("aria-pressed") == ("false" if allowed[i, j] else "true")
        assert torch.equal(page_mask(d, root), allowed)
        check(d, root, allowed)
    assert "blocked" in cell(root, 1, 1).get_attribute("aria-label")
    assert state(root)["dead"] == "1" and root.find_element(By.CSS_SELECTOR, ".attnlib-mask-dead").is_displayed()
    shot(d, "mask_clicked")
    # a key made padding: blocked for every query (the reader's cells in that column follow it)
    key = root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-key")[2]
    key.click()
    assert key.get_attribute("aria-pressed") == "true" and "padding" in key.get_attribute("aria-label")
    allowed[:, 2] = False
    check(d, root, allowed)
    causal = root.find_element(By.CSS_SELECTOR, "button.attnlib-mask-causal")
    causal.click()                                                   # the causal mask off: the clicks are cleared
    assert causal.get_attribute("aria-pressed") == "false"
    want = torch.ones(4, 4, dtype=torch.bool)
    want[:, 2] = False
    check(d, root, want)
    root.find_element(By.CSS_SELECTOR, "button.attnlib-mask-reset").click()
    check(d, root, attnlib.causal_mask(4))


def test_conventions_write_the_same_mask(page):
    d, root = page
    Select(root.find_element(By.CSS_SELECTOR, "select")).select_by_index(2)   # left padding + causal
    cell(root, 2, 1).click()                                        # one edit of a single cell
    allowed = page_mask(d, root)
    T = 3
    buttons = {b.get_attribute("data-convention"): b for b in root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-conv")}
    assert list(buttons) == ["sdpa", "additive", "nn_mha", "hf"]
    expected = {"sdpa": allowed.int(), "additive": masks.to_additive(allowed, torch.float64),
                "nn_mha": masks.to_nn_mha(allowed).int()}
    for name in ("additive", "nn_mha", "sdpa"):
        buttons[name].click()
        assert buttons[name].get_attribute("aria-pressed") == "true" and not buttons[name].is_enabled()
        assert all(b.get_attribute("aria-pressed") == "false" for n, b in buttons.items() if n != name)
        written = d.execute_script("return arguments[0].attnlibMask.written()", root)
        got = torch.tensor([float("-inf") if v is None else v for v in written], dtype=torch.float64).view(T, T)
        assert torch.equal(got, expected[name].double()), name
        # the weights the page computed from this form are attnlib's under the same mask
        check(d, root, allowed)
        assert state(root)["convention"] == name
    texts = [c.text for c in root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-cell")]
    assert texts[:3] == ["False", "False", "False"]                  # SDPA: query 0 may attend nothing
    buttons["nn_mha"].click()
    assert [c.text for c in root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-cell")][:3] == ["True"] * 3
    buttons["additive"].click()
    assert [c.text for c in root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-cell")][:3] == ["\u2212\u221e"] * 3
    # HF: one flag per key (1 = real); the single-cell edit cannot be written, the model adds causal
    buttons["hf"].click()
    flags = d.execute_script("return arguments[0].attnlibMask.written()", root)
    assert flags == [0, 1, 1] == masks.to_hf_attention_mask(attnlib.padding_mask(torch.tensor([[0, 1, 2]]), 0)).tolist()[0]
    model = (masks.from_hf_attention_mask(torch.tensor([flags]))[0, 0] & attnlib.causal_mask(3))
    assert torch.equal(torch.tensor(d.execute_script("return arguments[0].attnlibMask.allowed()", root), dtype=torch.bool).view(3, 3), model)
    np.testing.assert_allclose(page_weights(d, root, 3), reference(2, model), atol=TOL)
    assert "single-cell edit" in root.find_element(By.CSS_SELECTOR, ".attnlib-mask-lost").text
    assert [k.text for k in root.find_elements(By.CSS_SELECTOR, "button.attnlib-mask-key")] == ["0", "1", "1"]
    cell(root, 0, 2).click()                                          # in HF, a click sets the key's flag
    assert d.execute_script("return arguments[0].attnlibMask.written()", root) == [0, 1, 0]
    assert "attention_mask = torch.tensor([[0, 1, 0]])" in root.find_element(By.CSS_SELECTOR, ".attnlib-mask-code").text
    shot(d, "mask_hf")


def test_keyboard_alone(page):
    d, root = page
    first = cell(root, 0, 0)
    assert first.get_attribute("tabindex") == "0" and cell(root, 1, 1).get_attribute("tabindex") == "-1"
    d.execute_script("arguments[0].focus()", first)
    first.send_keys(Keys.ARROW_RIGHT)
    active = d.switch_to.active_element
    assert active.get_attribute("data-col") == "1" and active.get_attribute("tabindex") == "0"
    active.send_keys(Keys.ARROW_DOWN)
    active = d.switch_to.active_element
    active.send_keys(Keys.SPACE)                                      # (1, 1): allowed -> blocked
    assert d.switch_to.active_element.get_attribute("data-row") == "1"   # the focus stays on it
    want = attnlib.causal_mask(4).clone()
    want[1, 1] = False
    check(d, root, want)
    svg = root.find_element(By.CSS_SELECTOR, "svg.attnlib-plot")
    d.execute_script("arguments[0].focus()", svg)
    svg.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN, Keys.ENTER)
    assert state(root)["row"] == "2"
    detail = root.find_element(By.CSS_SELECTOR, ".attnlib-mask-detail").text
    assert "\u201cslept\u201d" in detail and "\u2212\u221e" in detail
    tip = root.find_element(By.CSS_SELECTOR, ".attnlib-tooltip")
    assert tip.is_displayed() and "weight = " in tip.text
    conv = root.find_element(By.CSS_SELECTOR, "button.attnlib-mask-conv[data-convention=additive]")
    d.execute_script("arguments[0].focus()", conv)
    conv.send_keys(Keys.ENTER)
    assert state(root)["convention"] == "additive"
    for b in root.find_elements(By.CSS_SELECTOR, "button"):
        assert (b.get_attribute("aria-label") or b.text).strip()


def test_legible_at_390_still_and_escaping(driver, tmp_path):
    evil = viz.mask_explorer(torch.eye(2), torch.eye(2), [EVIL, "b"], title=EVIL)
    path = write_page(tmp_path / "phone.html", [EX, evil])
    for width in (390, 1280):
        open_page(driver, path, width, 1000)
        root = driver.find_element(By.CSS_SELECTOR, "div.attnlib-mask")
        lay = driver.execute_script(JS_LAYOUT, root)
        assert lay["smallest"] >= 11 and lay["pageOverflow"] <= 0 and lay["outside"] == [], lay
        shot(driver, f"mask_{width}")
    other = driver.find_elements(By.CSS_SELECTOR, "div.attnlib-mask")[1]
    assert other.find_element(By.CSS_SELECTOR, ".attnlib-title").text == EVIL and other.find_elements(By.CSS_SELECTOR, "img") == []
    check_clean(driver)
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(write_page(tmp_path / "still.html", [EX]).as_uri())
        still = driver.find_element(By.CSS_SELECTOR, "div.attnlib-mask .attnlib-noscript")
        assert "Scripts do not run here" in still.text
        assert len(still.find_elements(By.CSS_SELECTOR, "svg rect")) == 16
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})

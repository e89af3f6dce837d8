"""Typing in the live model (issue 47), in a real headless Chromium: the matrix and the probabilities
follow every key, the cache view and the laboratory follow once typing pauses, and typing fast leaves
the page exactly as typing the final text at once; the probabilities panel does not move while the
reader types. Functional checks, nothing timed (benchmarks/playground_latency.py times it)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import attnlib
from attnlib import viz

pytestmark = pytest.mark.slow

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from _browser import chromium_driver, require_browser  # noqa: E402

require_browser()
from selenium.webdriver.common.by import By  # noqa: E402

MODEL, TOK = attnlib.load_tiny_gpt()
LIVE = viz.live_model(MODEL, TOK, title="Tiny GPT", experiments=[{"sentence": "try", "text": "And God"}])
TYPED = " unto Moses, and the LORD spake unto Aaron in the land of Egypt, saying"  # 12 + 71 > 64

# everything the page shows, as numbers and ids: the live model's matrix, bars, text and cache
# view, and each laboratory panel's state, cells and continuations
SNAPSHOT = """
var page = arguments[0].parentNode, out = {};
page.querySelectorAll('.attnlib-explorer').forEach(function (r, k) {
  var q = function (sel, attr) { return Array.from(r.querySelectorAll(sel), function (e) { return attr ? e.getAttribute(attr) : e.textContent; }); };
  out[k] = { state: r.getAttribute('data-state'), cells: q('svg.attnlib-plot rect.attnlib-cell', 'data-value'),
    fills: q('svg.attnlib-plot rect.attnlib-cell', 'fill'), labels: q('svg.attnlib-plot text'),
    bars: q('.attnlib-bar', 'data-p'), tokens: q('.attnlib-bar', 'data-token'), out: q('.attnlib-live-out', 'data-ids'),
    kv: q('rect.attnlib-live-kvcell', 'data-kv'), kvText: q('.attnlib-live-kv'), cont: q('.attnlib-lab-conttext', 'data-ids'),
    msg: q('.attnlib-live-msg') };
});
return out;
"""


@pytest.fixture(scope="module")
def driver():
    with chromium_driver("1000,1400") as d:
        yield d


def open_page(d, tmp_path: Path):
    path = tmp_path / "live.html"
    if not path.exists():
        LIVE.save(path)
    d.get(path.as_uri())
    return d.find_element(By.CSS_SELECTOR, "div.attnlib-live")


def settle(root, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while root.get_attribute("data-pending") == "1":
        assert time.monotonic() < deadline, "the deferred parts never ran"
        time.sleep(0.05)


def state(s: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in s.split(";"))


def test_typing_fast_ends_as_typing_once(driver, tmp_path):
    root = open_page(driver, tmp_path)
    box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-live-text")
    box.click()
    driver.execute_script("arguments[0].setSelectionRange(9999, 9999)", box)
    box.send_keys(TYPED)  # key after key, faster than the pause the deferred parts wait for
    settle(root)
    typed = driver.execute_script(SNAPSHOT, root)
    root = open_page(driver, tmp_path)
    driver.execute_script("var b = arguments[0].querySelector('textarea'); b.value = arguments[1];"
                          "b.dispatchEvent(new Event('input'));", root, "And God said" + TYPED)
    settle(root)
    once = driver.execute_script(SNAPSHOT, root)
    assert len(typed) == 4 and state(typed["0"]["state"])["n"] == "64"
    assert len(typed["0"]["cells"]) == 64 * 64 and len(typed["0"]["kv"]) == 2 * 64 * 16
    assert [len(typed[k]["cells"]) > 0 for k in "0123"] == [True] * 4
    for k in "0123":
        for key, value in once[k].items():
            assert typed[k][key] == value, f"panel {k}, {key}: typed fast and typed once differ"


def test_probabilities_stay_put_while_typing(driver, tmp_path):
    for width in (1000, 390):
        driver.set_window_size(width, 1400)
        root = open_page(driver, tmp_path)
        box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-live-text")
        driver.execute_script("var b = arguments[0]; b.value = 'A'; b.dispatchEvent(new Event('input'));", box)
        settle(root)
        box.click()
        driver.execute_script(
            "var box = arguments[0], bars = arguments[1]; box.setSelectionRange(9999, 9999); window.__boxes = [];"
            "box.addEventListener('input', function () { requestAnimationFrame(function () {"
            "  var r = bars.getBoundingClientRect(); window.__boxes.push([r.left, r.top + window.scrollY, r.width]); }); });",
            box, root.find_element(By.CSS_SELECTOR, ".attnlib-bars"))
        box.send_keys("nd God said unto Moses, and the LORD spake")  # 1 to 43 characters: cells 30 px to 10 px
        settle(root)
        boxes = driver.execute_script("return window.__boxes")
        assert len(boxes) == 42 and state(root.get_attribute("data-state"))["n"] == "43"
        moved = [b for b in boxes if max(abs(x - y) for x, y in zip(b, boxes[0])) > 0.5]
        assert moved == [], f"at {width} px the probabilities moved from {boxes[0]} to {moved[:3]}"
        beside = driver.execute_script("var f = arguments[0].querySelector('.attnlib-figure').getBoundingClientRect(),"
                                       " b = arguments[0].querySelector('.attnlib-bars').getBoundingClientRect();"
                                       " return b.left >= f.right;", root)
        assert beside == (width == 1000)
    driver.set_window_size(1000, 1400)


def test_the_deferred_parts_follow_after_the_pause(driver, tmp_path):
    root = open_page(driver, tmp_path)
    settle(root)
    first = driver.execute_script(SNAPSHOT, root)
    # one key, read back in the same task: the matrix and the bars follow it at once, the cache view
    # and the laboratory not yet
    now = driver.execute_script(
        "var r = arguments[0], b = r.querySelector('textarea'); b.value += 'x'; b.dispatchEvent(new Event('input'));"
        "return [r.getAttribute('data-pending'), r.getAttribute('data-state'),"
        " Array.from(r.parentNode.querySelectorAll('.attnlib-lab'), function (p) { return p.getAttribute('data-state'); }),"
        " r.querySelectorAll('rect.attnlib-live-kvcell').length, r.querySelectorAll('svg.attnlib-plot rect.attnlib-cell').length];", root)
    pending, live_state, lab_states, kv_cells, cells = now
    n0 = int(state(first["0"]["state"])["n"])
    assert pending == "1" and state(live_state)["n"] == str(n0 + 1) and cells == (n0 + 1) ** 2
    assert kv_cells == 2 * n0 * 16, "the cache view followed the key before the pause"
    assert lab_states == [first[k]["state"] for k in "123"], "the laboratory followed the key before the pause"
    settle(root)
    after = driver.execute_script(SNAPSHOT, root)
    ids = state(after["0"]["state"])["ids"]
    assert len(after["0"]["kv"]) == 2 * (n0 + 1) * 16 and f"{n0 + 1} tokens" in after["0"]["kvText"][0]
    assert [state(after[k]["state"])["ids"] for k in "123"] == [ids] * 3
    assert after["1"]["cont"] != first["1"]["cont"] or after["1"]["cells"] != first["1"]["cells"]
    # a press while the deferred parts wait draws them with its token: nothing is left stale
    driver.execute_script("var b = arguments[0].querySelector('textarea'); b.value += 'y';"
                          "b.dispatchEvent(new Event('input'));"
                          "arguments[0].querySelector('button.attnlib-live-step').click();", root)
    settle(root)
    s = driver.execute_script(SNAPSHOT, root)
    assert state(s["0"]["state"])["generated"] == "1" and "Decode step 1" in s["0"]["kvText"][0]

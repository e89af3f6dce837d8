"""Every explorer and output of the built book, read by a maintained accessibility checker: axe-core
(tests/vendor/axe-core, for the tests only; never part of a page) run in headless Chromium on each
page that holds an output (`div.attnlib-explorer`, `div.attnlib-exercise`, and the book's own
precomputed slider `div.attnlib-pslider`: its range input's name and value, and the state it
shows), in the light and the dark theme, after the outputs have drawn and again after a click has
changed each one (a selected row, a pressed toggle: the states that draw hatched cells and pressed
buttons).

The rules are axe's, not ours: text contrast (>= 4.5:1, 3:1 for large text) and the names and ARIA
of the controls. Contrast that axe cannot decide (text over a gradient or an image, such as a
hatched cell) comes back "incomplete"; that counts as a failure too, so text always sits on a
colour axe can measure.

Uses the build, server and 1280 x 800 browser of tests/test_book_browser.py (one browser, each page
loaded once per theme). Screenshots of a failing output go to artifacts/screenshots/a11y/.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from _axe import JS_CELLTEXT, failures, scan
from _axe import load as load_axe
from test_book_browser import (  # noqa: F401  (html_dir, server, laptop: fixtures used below)
    PAGES, ROOT, html_dir, laptop, open_page, server, wait_for)

pytestmark = pytest.mark.slow

SHOTS = ROOT / "artifacts" / "screenshots" / "a11y"
ROOTS = "div.attnlib-explorer, div.attnlib-exercise, div.attnlib-pslider"


def pages_with_outputs(html_dir: Path) -> list[str]:
    return [d for d in PAGES if re.search(r'class="attnlib-(explorer|exercise|pslider)\b',
                                          (html_dir / f"{d}.html").read_text(encoding="utf-8"))]


# one change per output, the kind a reader makes first: select a query row (the bars appear),
# press one toggle that is not pressed (a head switched off, a mask cell blocked: hatched)
JS_CHANGE = """
let n = 0;
for (const r of document.querySelectorAll(arguments[0])) {
  if (!r.getClientRects().length) continue;
  if (r.matches('.attnlib-pslider')) {  /* a precomputed slider: its next state */
    const step = r.querySelector('input.attnlib-pslider-range');
    step.value = String((+step.value + 1) % (+step.max + 1));
    step.dispatchEvent(new Event('input', {bubbles: true})); n++;
    continue;  /* an output in its state is a root of its own */
  }
  const row = Array.from(r.querySelectorAll('svg.attnlib-plot .attnlib-rowlabel[data-row]'))
    .find(t => t.getAttribute('visibility') !== 'hidden');
  if (row) { row.dispatchEvent(new MouseEvent('click', {bubbles: true})); n++; }
  const off = Array.from(r.querySelectorAll('button[aria-pressed=false]')).find(b => !b.disabled);
  if (off) { off.click(); n++; }
}
return n;
"""


# what axe reads of a precomputed slider: its control (the name and value of its range input)
# and the state it shows (a chapter's own HTML: chapter 10's sampled texts, chapter 14's rounds;
# an explorer in a state is also a root of its own)
AXE_ROOTS = ROOTS


def check(drv, docname: str, when: str, theme: str, found: list[str], measured: list[int]) -> int:
    drv.execute_script("document.documentElement.dataset.theme = arguments[0]", theme)
    time.sleep(0.2)
    result = scan(drv, AXE_ROOTS)
    cells = drv.execute_script(JS_CELLTEXT, ROOTS)
    bad = failures(result) + cells["bad"]
    measured.append(cells["n"])
    for b in bad:
        found.append(f"{docname} [{theme}, {when}] {b['rule']}: {b['target']} :: {b['why']} :: {b['html']}")
    if bad:
        SHOTS.mkdir(parents=True, exist_ok=True)
        drv.save_screenshot(str(SHOTS / f"{theme}_{docname.replace('/', '_')}_{when}.png"))
    return result["roots"]


def test_outputs_pass_axe(laptop, server, html_dir):
    """Each page loaded once: light, dark, one change per output, dark, light."""
    docs = pages_with_outputs(html_dir)
    assert len(docs) >= 12, f"only {docs} hold an output"
    found, roots, measured, sliders = [], 0, [], 0
    for docname in docs:
        open_page(laptop, server, docname, "light")
        wait_for(lambda: laptop.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).every("
            "r => !r.getClientRects().length || r.hasAttribute('data-state'))", ROOTS), timeout=20)
        load_axe(laptop)
        sliders += laptop.execute_script("return document.querySelectorAll('div.attnlib-pslider').length")
        roots += check(laptop, docname, "drawn", "light", found, measured)
        check(laptop, docname, "drawn", "dark", found, measured)
        laptop.execute_script(JS_CHANGE, ROOTS)
        time.sleep(0.6)  # a recompute (the live model, the mask's weights) lands
        check(laptop, docname, "changed", "dark", found, measured)
        check(laptop, docname, "changed", "light", found, measured)
    print(f"axe: {len(docs)} pages, {roots} outputs ({sliders} precomputed sliders), "
          f"{sum(measured)} cell values measured in SVG heatmaps, {len(found)} failures")
    assert sliders >= 1, "no precomputed slider (div.attnlib-pslider) was checked"
    assert roots >= 20, f"only {roots} outputs were checked"
    assert sum(measured) >= 100, f"only {sum(measured)} heatmap cell values were measured"
    assert not found, f"{len(found)} accessibility failures:\n" + "\n".join(found)

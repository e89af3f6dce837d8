"""axe-core in headless Chromium, shared by the browser tests that check accessibility: the
vendored checker (tests/vendor/axe-core, for the tests only; never part of a page), the rules run,
and the measure of text drawn in SVG heatmap cells, which axe cannot read.

    load(drv)                      put axe into the page
    scan(drv, roots) -> result     axe's RULES over the elements matching a CSS selector
    failures(result) -> [...]      its violations, and text over a pattern it could not measure
    drv.execute_script(JS_CELLTEXT, roots) -> {"n": measured, "bad": [...]}
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
# text contrast, and what a control must say to a screen reader
RULES = ["color-contrast", "button-name", "label", "select-name", "input-button-name",
         "aria-valid-attr", "aria-valid-attr-value", "aria-allowed-attr", "aria-required-attr",
         "aria-command-name", "aria-toggle-field-name", "aria-prohibited-attr", "nested-interactive"]


def load(drv) -> None:
    assert AXE.read_text(encoding="utf-8").startswith("/*! axe v4.14.1")
    drv.execute_script(AXE.read_text(encoding="utf-8"))


JS_RUN = """
const done = arguments[arguments.length - 1], rules = arguments[0];
const roots = Array.from(document.querySelectorAll(arguments[1])).filter(r => r.getClientRects().length);
if (!roots.length) { done({roots: 0, violations: [], incomplete: []}); return; }
axe.run(roots,
        {runOnly: {type: 'rule', values: rules}, resultTypes: ['violations', 'incomplete']})
  .then(res => {
    const brief = list => list.flatMap(v => v.nodes.map(n => ({
      rule: v.id, target: n.target.join(' '), html: n.html.slice(0, 120),
      why: (n.any.concat(n.all, n.none).map(c => c.message).join('; ')).slice(0, 200)})));
    done({roots: roots.length, violations: brief(res.violations), incomplete: brief(res.incomplete)});
  }, err => done({error: String(err)}));
"""


def scan(drv, roots: str) -> dict:
    """axe's RULES over the elements that match ``roots`` (a CSS selector), as drawn now."""
    return drv.execute_async_script(JS_RUN, RULES, roots)


# an undecided contrast check that means "text over a pattern": a hatched cell
HIDDEN_BEHIND = ("background gradient", "background image")


def failures(result: dict) -> list[dict]:
    """axe's violations, and the text whose contrast axe could not measure because it sits on a
    gradient or an image (a hatch drawn in CSS): such text must sit on a colour of its own."""
    assert "error" not in result, result.get("error")
    return result["violations"] + [i for i in result["incomplete"] if i["rule"] == "color-contrast"
                                   and any(h in i["why"] for h in HIDDEN_BEHIND)]


# axe does not read text drawn in SVG over SVG shapes (it cannot see what lies behind it): for the
# values printed in heatmap cells, each text's colour is measured against what is behind it with
# axe's own colour arithmetic (axe.commons.color): the cell's fill, or for a hatched cell the text's
# halo (a stroke painted under it) if it has one, else the hatch's lines.
JS_CELLTEXT = """
const C = axe.commons.color, bad = [];
let n = 0;
const paint = (e, prop) => {
  const v = getComputedStyle(e)[prop];
  return v && v !== 'none' && !v.startsWith('url') ? v : null;
};
for (const r of document.querySelectorAll(arguments[0])) {
  for (const t of r.querySelectorAll('svg text.attnlib-celltext')) {
    if (!t.textContent.trim() || !t.getClientRects().length) continue;
    t.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});  /* hit-testing
      sees only what is in the viewport */
    const b = t.getBoundingClientRect();
    const cell = document.elementsFromPoint(b.x + b.width / 2, b.y + b.height / 2)
      .find(e => e.tagName === 'rect');
    if (!cell) continue;
    let back = paint(cell, 'fill'), halo = paint(t, 'stroke');
    if (!back) {  /* a pattern: its lines, unless the text carries a halo of its own */
      const id = getComputedStyle(cell).fill.match(/#([^"')]+)/);
      const line = id && document.getElementById(id[1]) && document.getElementById(id[1]).querySelector('line');
      back = halo && getComputedStyle(t).paintOrder.startsWith('stroke') &&
        parseFloat(getComputedStyle(t).strokeWidth) >= 2 ? halo : (line ? paint(line, 'stroke') : null);
    }
    if (!back) continue;
    n++;
    const fg = new C.Color(), bg = new C.Color();
    fg.parseString(paint(t, 'fill')); bg.parseString(back);
    const ratio = C.getContrast(bg.alpha < 1 ? C.flattenColors(bg, new C.Color(255, 255, 255, 1)) : bg, fg);
    if (ratio < 4.5) bad.push({rule: 'svg-cell-text-contrast', target: t.textContent + ' on ' + back,
                               html: t.outerHTML.slice(0, 120), why: 'contrast ' + ratio.toFixed(2)});
  }
}
return {n: n, bad: bad};
"""

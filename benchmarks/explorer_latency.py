"""Every explorer, input to painted frame: ``python -m benchmarks.explorer_latency [--samples 3] [--pages a,b]``.

Opens every page of the built book (``_build/html``; built with ``scripts/build_book.py`` when
missing) in headless Chromium (``tests/_browser.py``'s driver, served over HTTP as a reader gets
it) and, in every output it holds (``div.attnlib-explorer``, ``div.attnlib-exercise``, the book's
precomputed sliders ``div.attnlib-pslider``), operates every visible, enabled control with real
input through WebDriver, ``--samples`` times each:

- range inputs, number boxes and selects: arrow keys (right/left, up/down, alternately);
- text boxes (the Playground's text, an exercise's answer): a character typed, then deleted;
- the focusable matrix of a heatmap and a vector explorer's handles: arrow keys;
- a query row: a click on its label, two rows in turn;
- a heatmap's cells: the pointer moved onto one cell, then another (its tooltip, a row's bars);
- buttons and toggles: a click.

Each sample is timed in the page by ``benchmarks/frame_latency.py``'s probe (the one
``benchmarks.playground_latency`` uses): from the input event's ``timeStamp`` (the key down, the
pointer's release, its move) to the first frame painted after the page's handlers ran. Buttons
that start a heavy computation on purpose (``HEAVY``: loading SmolLM2, generating tokens) are
timed to their first painted response, the page acknowledging the click, not to the end of the
work, and are listed apart. Median and p90 per explorer kind and page, each control's own, and
the machine's CPU stall (Linux PSI) go to ``benchmarks/results/explorer_latency.json``;
``python -m benchmarks.report`` puts the table on book/benchmarks.md.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from .frame_latency import PROBE, summary
from .harness import Settings, Target, cpu_pressure_avg10, cpu_stall_us, environment
from .smollm2_browser import save

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
OUT = ROOT / "benchmarks" / "results" / "explorer_latency.json"
SCHEMA = "attnlib-explorer-latency/1"
TARGET_MS = 60.0
ROOTS = "div.attnlib-explorer, div.attnlib-exercise, div.attnlib-pslider"

# an output's kind, from its root's classes (the first that matches)
KINDS = (("attnlib-pslider", "precomputed slider"), ("attnlib-live", "live tiny GPT"),
         ("attnlib-lab", "live tiny GPT: lab"), ("attnlib-llm", "SmolLM2 lab"),
         ("attnlib-vectors", "vector explorer"), ("attnlib-mask", "mask explorer"),
         ("attnlib-heads", "heads grid"), ("attnlib-exercise", "exercise"),
         ("attnlib-explorer", "attention explorer"))
# controls that start a heavy computation on purpose: timed to their first painted response
HEAVY = {("SmolLM2 lab", "attnlib-llm-load"): "loads the 98 MB model file",
         ("live tiny GPT", "attnlib-live-step"): "generates the next token",
         ("live tiny GPT", "attnlib-live-many"): "generates 16 tokens"}


def kind_of(classes: str) -> str:
    names = classes.split()
    return next(kind for cls, kind in KINDS if cls in names)


def book_kinds(root: Path = ROOT) -> set[str]:
    """The explorer kinds the book's pages hold, read from the stored notebooks (no browser): the
    root classes of their HTML outputs (the Playground's lab is drawn by live_lab.js, which the
    live model's output carries), and the precomputed sliders (scripts/book_checks.py)."""
    sys.path.insert(0, str(root / "scripts"))
    import book_checks

    kinds = set()
    for path in sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "book").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        outs = [o for c in nb.get("cells", []) for o in c.get("outputs", []) or []]
        html = "".join("".join(o.get("data", {}).get("text/html", "")) for o in outs)
        for m in re.finditer(r'<div class="(attnlib-(?:explorer|exercise)[^"]*)"', html):
            kinds.add(kind_of(m.group(1)))
        if "attnlib-explorer attnlib-kit attnlib-lab " in html:
            kinds.add("live tiny GPT: lab")
        state = nb.get("metadata", {}).get("widgets", {}).get(book_checks.WIDGET_STATE, {}).get("state", {})
        views = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for o in outs
                 if "application/vnd.jupyter.widget-view+json" in (o.get("data") or {})]
        if any(book_checks.precomputed_slider_parts(state, v) for v in views):
            kinds.add("precomputed slider")
    return kinds


# every control of every output: [root index, its classes, how it is operated, name, first class,
# ordinal among the root's controls of that kind and class]; with arguments[1] = such an entry, [root,
# element] of that control as the page holds it now (an explorer may redraw its controls)
JS_CONTROLS = """
const shown = e => e.getClientRects().length > 0 && !e.closest('[hidden]');  /* disabled ones too: stable ordinals */
const out = [], want = arguments[1];
document.querySelectorAll(arguments[0]).forEach((r, i) => {
  if (!shown(r) || (want && want[0] !== i)) return;
  const inner = Array.from(r.querySelectorAll(arguments[0])).filter(x => x !== r);
  const own = e => !inner.some(x => x.contains(e)) && shown(e);
  const name = e => (e.getAttribute('aria-label') || e.textContent || e.className.baseVal || e.className || '').trim().slice(0, 48);
  const seen = {};
  const add = (e, how) => {
    const cls = (e.getAttribute('class') || '').split(' ')[0], key = how + '|' + cls;
    const k = seen[key] = (seen[key] || 0) + 1;  /* names say a state, which changes: found by class */
    out.push([i, r.className, how, name(e), cls, k, r, e]);
  };
  r.querySelectorAll('svg.attnlib-plot').forEach(svg => {
    if (!own(svg)) return;
    if (svg.querySelectorAll('[data-value]').length > 1) add(svg, 'hover');
    if (svg.getAttribute('tabindex') === '0') add(svg, 'matrix keys');
    const rows = Array.from(svg.querySelectorAll('.attnlib-rowlabel[data-row]')).filter(shown);
    if (rows.length > 1) add(svg, 'row click');
    svg.querySelectorAll('.attnlib-handle[tabindex]').forEach(h => add(h, 'handle keys'));
  });
  r.querySelectorAll('input, textarea, select').forEach(e => {
    if (!own(e)) return;
    const t = e.tagName === 'SELECT' ? 'select' : e.tagName === 'TEXTAREA' ? 'text' : e.type;
    if (['range', 'number', 'select', 'text'].includes(t)) add(e, t);
  });
  r.querySelectorAll('button').forEach(e => { if (own(e)) add(e, e.hasAttribute('aria-pressed') ? 'toggle' : 'button'); });
});
if (want) {
  const hit = out.find(c => c[2] === want[2] && c[4] === want[4] && c[5] === want[5]);
  return hit ? [hit[6], hit[7]] : null;
}
return out.map(c => c.slice(0, 6));
"""

ORDER = ("hover", "matrix keys", "row click", "range", "number", "select", "text", "handle keys",
         "toggle", "button")  # buttons last: some change what the others operate (a key removed)

# a point inside cell k of a heatmap, relative to the svg's centre (a canvas-painted matrix keeps
# its cells as hidden rects: the pointer goes where the rect would be drawn)
JS_CELL_OFFSET = """
const svg = arguments[0], cells = svg.querySelectorAll('[data-value]'), r = cells[arguments[1] % cells.length];
const box = svg.getBoundingClientRect();
const p = new DOMPoint(+r.getAttribute('x') + r.getAttribute('width') / 2,
                       +r.getAttribute('y') + r.getAttribute('height') / 2).matrixTransform(svg.getScreenCTM());
return [Math.round(p.x - (box.left + box.width / 2)), Math.round(p.y - (box.top + box.height / 2))];
"""

KEYS = {"range": ("ARROW_RIGHT", "ARROW_LEFT"), "number": ("ARROW_UP", "ARROW_DOWN"),
        "select": ("ARROW_DOWN", "ARROW_UP"), "matrix keys": ("ARROW_DOWN", "ARROW_UP"),
        "handle keys": ("ARROW_RIGHT", "ARROW_LEFT"), "text": ("x", "BACK_SPACE")}
ARM = {"range": (["keydown"], ["input"]), "number": (["keydown"], ["input"]),
       "select": (["keydown"], ["input", "change"]), "text": (["keydown"], ["input"]),
       "matrix keys": (["keydown"], ["keydown"]), "handle keys": (["keydown"], ["keydown"]),
       "row click": (["pointerup"], ["click"]), "toggle": (["pointerup"], ["click"]),
       "button": (["pointerup"], ["click"]),
       "hover": (["pointerover", "pointermove", "mouseover", "mousemove"],
                 ["pointerover", "pointermove", "mouseover", "mousemove"])}


def _operate(d, how: str, el, k: int) -> None:
    """Sample k of one control: real input through WebDriver."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    if how in KEYS:
        first, second = KEYS[how]
        if how in ("range", "number", "select"):  # at an end: the way back in; else in turn
            end = d.execute_script(
                "const e = arguments[0], s = e.tagName === 'SELECT';"
                "if (s ? e.selectedIndex >= e.options.length - 1 : e.max !== '' && +e.value >= +e.max) return 1;"
                "if (s ? e.selectedIndex <= 0 : e.min !== '' && +e.value <= +e.min) return -1; return 0;", el)
            k = {1: 1, -1: 0}.get(end, k)
        key = first if k % 2 == 0 else second
        ActionChains(d, duration=0).send_keys(getattr(Keys, key, key)).perform()
    elif how == "hover":
        dx, dy = d.execute_script(JS_CELL_OFFSET, el, 1 + 3 * (k % 2))
        ActionChains(d, duration=0).move_to_element_with_offset(el, dx, dy).perform()
    elif how == "row click":
        rows = [r for r in el.find_elements("css selector", ".attnlib-rowlabel[data-row]") if r.is_displayed()]
        ActionChains(d, duration=0).move_to_element(rows[1 + (k % 2)] if len(rows) > 2 else rows[k % 2]).pause(0.05) \
            .click().perform()
    else:
        ActionChains(d, duration=0).move_to_element(el).pause(0.05).click().perform()


def _sample(d, root, how: str, el, k: int, timeout: float) -> dict | None:
    start, react = ARM[how]
    n0 = d.execute_script("return window.__frameProbe.records.length")
    d.execute_script("window.__frameProbe.arm({start: arguments[1], react: arguments[2], target: arguments[0]})",
                     root, start, react)
    _operate(d, how, el, k)
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        recs = d.execute_script("var r = window.__frameProbe.records; return r.length > arguments[0] ? r[r.length - 1] : null",
                                n0)
        if recs:
            return recs
        time.sleep(0.02)
    d.execute_script("window.__frameProbe.armed = null")
    return None


def measure_page(d, url: str, doc: str, samples: int, settle: float, log) -> list[dict]:
    from selenium.common.exceptions import WebDriverException

    d.get(url)
    t_end = time.monotonic() + 30
    while time.monotonic() < t_end and not d.execute_script(
            "return document.readyState === 'complete' && Array.from(document.querySelectorAll(arguments[0]))"
            ".every(r => !r.getClientRects().length || r.hasAttribute('data-state'))", ROOTS):
        time.sleep(0.1)
    time.sleep(1.0)  # first draws and deferred parts are done
    d.execute_script(PROBE)
    controls = d.execute_script(JS_CONTROLS, ROOTS, None)
    controls.sort(key=lambda c: ORDER.index(c[2]))
    rows = []
    for entry in controls:
        i, classes, how, name, cls, _ = entry
        kind = kind_of(classes)
        heavy = HEAVY.get((kind, cls))
        n = 1 if heavy and kind == "SmolLM2 lab" else samples
        rec = {"page": doc, "root": i, "kind": kind, "control": how, "name": name, "heavy": heavy,
               "paint_ms": [], "raf_ms": [], "handler_ms": [], "missed": 0}
        try:
            for k in range(n):
                found = d.execute_script(JS_CONTROLS, ROOTS, entry)  # as the page holds it now
                if found is None:
                    rec["error"] = "gone"  # removed by another control (a key deleted)
                    break
                root, el = found
                if d.execute_script("return !!arguments[0].disabled", el):
                    rec["disabled"] = rec.get("disabled", 0) + 1  # not operable in this state (a key made padding)
                    continue
                d.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
                if how in KEYS and not d.execute_script("return document.activeElement === arguments[0]", el):
                    d.execute_script("arguments[0].focus({preventScroll: true});", el)
                    time.sleep(0.15)  # what focusing draws (a matrix's cursor) is not a sample
                r = _sample(d, root, how, el, k, timeout=3.0)
                if r is None:
                    rec["missed"] += 1
                else:
                    rec["paint_ms"].append(round(r["paint"], 2))
                    rec["raf_ms"].append(round(r["raf"], 2))
                    rec["handler_ms"].append(round(r.get("handler") or 0, 2))
                time.sleep(settle * (5 if heavy else 1))
        except WebDriverException as e:
            rec["error"] = type(e).__name__
        if rec["paint_ms"]:
            rec.update(summary(rec["paint_ms"]))
        rows.append(rec)
        log(f"  {doc} #{i} {kind} / {how} {name!r}: {rec.get('median_ms')} ms median of {len(rec['paint_ms'])}"
            + (f" (heavy: {heavy})" if heavy else "") + (f" [{rec['missed']} missed]" if rec["missed"] else "")
            + (f" [{rec['error']}]" if rec.get("error") else "") + (f" [disabled {rec['disabled']}x]" if rec.get("disabled") else ""))
    return rows


def pages(html: Path) -> list[str]:
    """Every page of the built book that holds an output, landing page first."""
    docs = [p.relative_to(html).with_suffix("").as_posix() for p in sorted(html.glob("book/*.html"))
            + sorted(html.glob("notebooks/*.html"))]
    return [d for d in docs if re.search(r'class="attnlib-(explorer|exercise|pslider)\b',
                                         (html / f"{d}.html").read_text(encoding="utf-8"))]


def tables(controls: list[dict]) -> list[dict]:
    """Median and p90 per explorer kind and page (heavy controls apart)."""
    groups: dict[tuple, list[dict]] = {}
    for c in controls:
        groups.setdefault((c["kind"], c["page"], bool(c["heavy"])), []).append(c)
    out = []
    for (kind, page, heavy), cs in sorted(groups.items()):
        xs = [x for c in cs for x in c["paint_ms"]]
        if not xs:
            continue
        out.append({"kind": kind, "page": page, "heavy": heavy, "controls": len(cs),
                    "what": sorted({c["control"] for c in cs}), **summary(xs),
                    "raf_median_ms": round(statistics.median(x for c in cs for x in c["raf_ms"]), 1)})
    return out


def run(html: Path, only: list[str] | None, samples: int, settle: float, log=print) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import chromium_driver

    if not (html / "index.html").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py")], check=True, cwd=ROOT)
    docs = [d for d in pages(html) if not only or any(o in d for o in only)]
    docs.sort(key=lambda d: "smollm2" in d)  # the model's load last: it keeps the CPU busy

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    psi0, stall0, t0 = cpu_pressure_avg10(), cpu_stall_us(), time.monotonic()
    controls = []
    try:
        with chromium_driver("1280,900") as d:
            version = d.capabilities.get("browserVersion")
            for doc in docs:
                log(doc)
                controls += measure_page(d, f"http://127.0.0.1:{httpd.server_address[1]}/{doc}.html", doc,
                                         samples, settle, log)
    finally:
        httpd.shutdown()
        httpd.server_close()
    elapsed = time.monotonic() - t0
    env = environment(Settings(mode="quick", threads=1))
    env["machine"] = platform.machine()
    env["cpu_pressure_avg10_start"] = psi0
    env["cpu_pressure_avg10_end"] = cpu_pressure_avg10()
    rows = tables(controls)
    light = [r for r in rows if not r["heavy"]]
    worst = max(light, key=lambda r: r["median_ms"]) if light else None
    targets = [Target("every explorer kind and page: input to painted frame, the largest median ms "
                      f"({worst['kind']}, {worst['page']})" if worst else "every explorer kind and page",
                      worst["median_ms"] if worst else None, "<=", TARGET_MS)]
    return {"schema": SCHEMA, "env": env,
            "settings": {"samples": samples, "settle_s": settle, "pages": docs, "window": "1280,900"},
            "browser": {"chromium": version, "seconds": round(elapsed, 1),
                        "cpu_stall": None if stall0 is None else round((cpu_stall_us() - stall0) / 1e6 / elapsed, 3)},
            "heavy": [{"kind": k, "control": c, "what": w} for (k, c), w in HEAVY.items()],
            "kinds": sorted({r["kind"] for r in rows}), "table": rows, "controls": controls,
            "targets": [t.to_dict() for t in targets]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3, help="samples per control")
    parser.add_argument("--settle", type=float, default=0.25, help="seconds between samples")
    parser.add_argument("--pages", default="", help="comma-separated parts of page names (default: all)")
    parser.add_argument("--html", type=Path, default=HTML)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    only = [p for p in args.pages.split(",") if p]
    doc = run(args.html.resolve(), only, args.samples, args.settle, log=lambda s: print(s, flush=True))
    lines = [f"{r['kind']:22s} {r['page']:40s} {'heavy, first response ' if r['heavy'] else ''}"
             f"median {r['median_ms']:6.1f} ms  p90 {r['p90_ms']:6.1f} ms  ({r['controls']} controls, {r['n']} samples)"
             for r in doc["table"]]
    lines.append(f"CPU pressure avg10 {doc['env']['cpu_pressure_avg10_start']} -> {doc['env']['cpu_pressure_avg10_end']}; "
                 f"stall {doc['browser']['cpu_stall']}")
    return save(doc, args.out, lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

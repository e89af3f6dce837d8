"""Where a Playground keystroke's time goes, from Chromium's own trace:
``python -m benchmarks.playground_trace PAGE [PAGE ...] [--reps 2] [--keys 20]``.

Types into each page as ``benchmarks.playground_latency`` does (its probe, text and pace), with the
``devtools.timeline`` trace on (chromedriver's performance log), and sums, per keystroke, the
renderer main thread's CPU time (the trace's thread time, ``tdur``: what the page itself cost,
much less moved by other work on a loaded machine than wall-clock times) by phase: the input
handler, style, layout, paint, ... The window runs from the first key to 0.9 gap after the last,
so the deferred parts (200 ms after a pause) fall outside unless the machine stretched a gap
(then they show as TimerFire). Several pages are run in turn, ``--reps`` times (paired before /
after comparisons: e.g. a built page and a copy with other scripts); medians are printed.
Nothing is written.
"""
from __future__ import annotations

import argparse
import collections
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .playground_latency import PROBE, ROOT, TEXT64, TYPED, percentile

PHASES = ("RunTask", "EventDispatch", "FunctionCall", "TimerFire", "FireAnimationFrame", "UpdateLayoutTree",
          "Layout", "PrePaint", "Paint", "Layerize", "Commit", "Blink.ForcedStyleAndLayout.UpdateTime",
          "TypingCommand::InsertText", "MajorGC", "MinorGC", "HitTest")


def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import require_browser

    chromium, chromedriver = require_browser()
    opts = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1100,1400", "--force-device-scale-factor=1"):
        opts.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="attnlib-trace-")
    opts.add_argument(f"--user-data-dir={profile}")
    opts.binary_location = chromium
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    opts.add_experimental_option("perfLoggingPrefs", {"enableNetwork": False, "enablePage": False,
                                                      "traceCategories": "devtools.timeline,disabled-by-default-devtools.timeline,blink"})
    return webdriver.Chrome(service=Service(chromedriver), options=opts), profile


def breakdown(events: list[dict], gap: float) -> dict[str, float]:
    """Thread CPU ms per key on the renderer's main thread, by phase (nested phases overlap)."""
    keys = [e for e in events if e["name"] == "EventDispatch" and e.get("args", {}).get("data", {}).get("type") == "keydown"]
    if not keys:
        return {}
    pid, tid, t0, t1 = keys[0]["pid"], keys[0]["tid"], keys[0]["ts"], keys[-1]["ts"] + 0.9 * gap * 1e6
    total = collections.Counter()
    for e in events:
        if e["pid"] != pid or e["tid"] != tid or e.get("ph") != "X" or not t0 - 1 <= e["ts"] <= t1:
            continue
        name = e["name"]
        if name == "EventDispatch":
            name += ":" + e.get("args", {}).get("data", {}).get("type", "?")
        if name.split(":")[0] in PHASES:
            total[name] += e.get("tdur", 0) / 1000
    return {k: round(v / len(keys), 2) for k, v in total.most_common() if v / len(keys) >= 0.2}


def measure(page: Path, keys: int, gap: float) -> dict:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    d, profile = driver()
    try:
        d.get(page.resolve().as_uri())
        root = d.find_element(By.CSS_SELECTOR, "div.attnlib-live")
        box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-live-text")
        d.execute_script("var b = arguments[0]; b.value = arguments[1];"
                         "b.dispatchEvent(new Event('input', {bubbles: true}));", box, TEXT64)
        time.sleep(1.5)
        d.execute_script(PROBE, root)
        box.click()
        d.execute_script("arguments[0].setSelectionRange(9999, 9999)", box)
        typing = ActionChains(d, duration=0)
        for ch in (TYPED * 4)[:keys]:
            typing.send_keys(ch).pause(gap)
        typing.perform()
        time.sleep(0.6)
        lat = d.execute_script("return window.__lat")
        logs = d.get_log("performance")
    finally:
        d.quit()
        shutil.rmtree(profile, ignore_errors=True)
    events = []
    for m in logs:
        msg = json.loads(m["message"])["message"]
        if msg.get("method") == "Tracing.dataCollected":
            events.append(msg["params"])
    paint = [r["paint"] for r in lat]
    return {"median_ms": statistics.median(paint), "p90_ms": percentile(paint, 0.9),
            "handler_ms": statistics.median(r["handler"] for r in lat), "cpu_ms_per_key": breakdown(events, gap)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", type=Path, nargs="+")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.12)
    args = parser.parse_args(argv)
    runs: dict[Path, list[dict]] = {p: [] for p in args.pages}
    for _ in range(args.reps):
        for p in args.pages:
            psi = Path("/proc/pressure/cpu").read_text().split()[1] if Path("/proc/pressure/cpu").exists() else "?"
            r = measure(p, args.keys, args.gap)
            runs[p].append(r)
            print(f"{p.name}: wall median {r['median_ms']:.1f} ms, p90 {r['p90_ms']:.1f} ms, handler {r['handler_ms']:.1f} ms, "
                  f"main-thread CPU {r['cpu_ms_per_key'].get('RunTask')} ms/key (cpu pressure {psi})", flush=True)
    for p, rs in runs.items():
        names = rs[0]["cpu_ms_per_key"].keys()
        med = {k: round(statistics.median(r["cpu_ms_per_key"].get(k, 0) for r in rs), 2) for k in names}
        print(f"== {p}: median over {len(rs)} runs, thread CPU ms per key: {json.dumps(med)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

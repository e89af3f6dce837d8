"""The Playground, keystroke to frame: ``python -m benchmarks.playground_latency [--keys 30] [--page FILE]``.

Opens the book's Playground (``_build/html/book/playground.html``; built with
``scripts/build_book.py`` when missing) in headless Chromium (``tests/_browser.py``'s driver),
puts a 64-character text in its box (the model's whole context) and types ``--keys`` more
characters one at a time, ``--gap`` seconds apart (a fast typist), so that every keystroke leaves
64 characters for the model to read. In the page, for each keystroke: from the key event's
``timeStamp`` to the first ``requestAnimationFrame`` after the page's own input handler ran
(``raf``), and to a message posted from that frame's callback, which runs once the frame is
painted (``paint``, the number the target is on). Median and p90 over the keys; the renderer's CPU
time over the typing (psutil) and the CPU stall of the run (Linux PSI) say how busy the machine
was. Writes ``benchmarks/results/playground_latency.json``; ``python -m benchmarks.report`` puts it
on book/benchmarks.md.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .frame_latency import PROBE as FRAME_PROBE
from .frame_latency import percentile  # noqa: F401  (benchmarks.playground_trace reads it here)
from .harness import Settings, Target, cpu_stall_us, environment
from .smollm2_browser import save

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "playground_latency.json"
PAGE = ROOT / "_build" / "html" / "book" / "playground.html"
SCHEMA = "attnlib-playground-latency/1"
TARGET_MS = 60.0
TEXT64 = "In the beginning God created the heaven and the earth. And the e"
TYPED = "arth was without form, and void; and darkness was upon the face of the deep."

# installed in the page before typing (benchmarks/frame_latency.py's probe, armed for the box):
# each keystroke's start is its key event's timeStamp; the box's input event, after the page's
# handlers, asks for a frame and records at it and once it is painted
PROBE = FRAME_PROBE + """
window.__frameProbe.arm({start: ['keydown'], react: ['input'], persist: true,
                         target: arguments[0].querySelector('textarea.attnlib-live-text')});
"""


def measure(page: Path, keys: int, gap: float) -> dict:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(ROOT / "tests"))
    from _browser import chromium_driver

    from .smollm2_browser import cpu_s

    with chromium_driver("1100,1400") as d:
        version = d.capabilities.get("browserVersion")
        d.get(page.as_uri())
        root = d.find_element(By.CSS_SELECTOR, "div.attnlib-live")
        box = root.find_element(By.CSS_SELECTOR, "textarea.attnlib-live-text")
        d.execute_script("var b = arguments[0]; b.value = arguments[1];"
                         "b.dispatchEvent(new Event('input', {bubbles: true}));", box, TEXT64)
        time.sleep(1.5)  # the text's own update, deferred parts included, is done
        d.execute_script(PROBE, root)
        box.click()
        d.execute_script("arguments[0].setSelectionRange(9999, 9999)", box)
        pid = d.service.process.pid
        c0, t0 = cpu_s(pid), time.monotonic()
        typing = ActionChains(d, duration=0)  # one request: the keys and pauses timed by the driver itself
        for ch in (TYPED * 4)[:keys]:
            typing.send_keys(ch).pause(gap)
        typing.perform()
        time.sleep(1.0)
        typing_s = time.monotonic() - t0
        cpu = None if c0 is None else cpu_s(pid) - c0
        lat = d.execute_script("return window.__lat", root)
        n = len(d.execute_script("return arguments[0].attnlibLive.encode(arguments[1].value).ids", root, box))
    paint = [r["paint"] for r in lat]
    raf = [r["raf"] for r in lat]
    handler = [r["handler"] for r in lat]
    return {"chromium": version, "keys": len(lat), "gap_s": gap, "text_chars": n,
            "paint_ms": paint, "raf_ms": raf,
            "median_ms": statistics.median(paint), "p90_ms": percentile(paint, 0.9),
            "raf_median_ms": statistics.median(raf), "raf_p90_ms": percentile(raf, 0.9),
            "handler_median_ms": statistics.median(handler), "handler_ms": handler,
            "typing_s": typing_s, "renderer_cpu_s": cpu}


def run(page: Path, keys: int, gap: float) -> dict:
    if not page.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py")], check=True, cwd=ROOT)
    stall0, t_start = cpu_stall_us(), time.monotonic()
    browser = measure(page, keys, gap)
    elapsed = time.monotonic() - t_start
    browser["cpu_stall"] = None if stall0 is None else (cpu_stall_us() - stall0) / 1e6 / elapsed
    env = environment(Settings(mode="quick", threads=1))
    env["machine"] = platform.machine()
    targets = [Target("Playground: keystroke to painted frame, median ms (64 characters)", browser["median_ms"],
                      "<=", TARGET_MS)]
    return {"schema": SCHEMA, "env": env, "settings": {"keys": keys, "gap_s": gap, "text64": TEXT64,
                                                       "page": str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)},
            "browser": browser, "targets": [t.to_dict() for t in targets]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.12, help="seconds between keystrokes")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    doc = run(args.page.resolve(), args.keys, args.gap)
    b = doc["browser"]
    return save(doc, args.out, [
        f"{b['keys']} keys at {b['text_chars']} characters: keystroke -> painted frame median {b['median_ms']:.1f} ms, "
        f"p90 {b['p90_ms']:.1f} ms (-> rAF median {b['raf_median_ms']:.1f} ms; the page's input handler "
        f"{b['handler_median_ms']:.1f} ms); renderer CPU {b['renderer_cpu_s']} s over {b['typing_s']:.1f} s; "
        f"stall {b['cpu_stall']}"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

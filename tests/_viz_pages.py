"""Helpers for the browser tests of the computing outputs: a page like the book's column (viewport
meta, 16 px margins), a phone or desktop width, the page's state, and a clean console and network."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "artifacts" / "screenshots"
EVIL = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=1\">"


def write_page(path: Path, fragments: Iterable[Any]) -> Path:
    body = "\n".join(f._repr_html_() if hasattr(f, "_repr_html_") else str(f) for f in fragments)
    path.write_text("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
                    "<meta name='viewport' content='width=device-width, initial-scale=1'><title>t</title></head>"
                    "<body style='max-width:760px;margin:0 auto;padding:12px 16px;font-family:sans-serif'>"
                    f"{body}</body></html>", encoding="utf-8")
    return path


def open_page(d, path: Path, width: int = 1000, height: int = 1200):
    """Load a page at a CSS width (phones: mobile emulation, so the viewport meta applies)."""
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    d.get_log("browser"), d.get_log("performance")
    d.get(path.as_uri())


def state(root) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in root.get_attribute("data-state").split(";"))


def check_clean(d) -> None:
    """No console errors, nothing requested off the page, no injected script ran."""
    errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    urls = []
    for entry in d.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    local = ("file:", "data:", "blob:", "about:", "chrome:", "chrome-extension:")
    assert [u for u in urls if not u.startswith(local)] == [], "requests left the page"
    assert d.execute_script("return window.__pwned === undefined"), "injected script ran"


def shot(d, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"{name}.png"))


# text inside an output: the smallest rendered font size, and whether anything runs off its box
JS_LAYOUT = """
const root = arguments[0], rb = root.getBoundingClientRect();
let smallest = 99, wide = [];
root.querySelectorAll('svg text, td, th, button, label, span, div').forEach(e => {
  if (!e.getClientRects().length || !e.textContent.trim() || getComputedStyle(e).visibility === 'hidden') return;
  const r = e.getBoundingClientRect(), m = e.getScreenCTM ? e.getScreenCTM() : null;
  const size = parseFloat(getComputedStyle(e).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
  if (e.closest('.attnlib-tooltip')) return;
  smallest = Math.min(smallest, size);
  if (r.right > rb.right + 1 || r.left < rb.left - 1) wide.push(e.tagName + ':' + e.textContent.slice(0, 20));
});
return {smallest: smallest, overflow: root.scrollWidth - root.clientWidth, outside: wide.slice(0, 5),
        pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth};
"""

"""Input to painted frame in headless Chromium: the probe every latency benchmark installs in a page
(``benchmarks.playground_latency`` for the Playground's typing, ``benchmarks.explorer_latency`` for
every explorer's controls).

``PROBE`` (run once a page) puts capture listeners on ``window``, which run before any of the
page's own. ``window.__frameProbe.arm({start, react, target, persist, tag})`` waits for input
inside ``target``: the first event of a ``start`` type gives the sample's start (its
``timeStamp``: the key or pointer event as the browser received it); the first event of a
``react`` type (the one the page's control listens to: ``input`` for a key in a box, ``click``
for a button) asks for a frame, and records, after the page's handlers ran (a bubbling listener
on ``window``: ``handler``), at that frame (``raf``) and at a message posted from that frame's
callback, which runs once the frame is painted (``paint``, the number the 60 ms target is on),
the ms since the start. ``persist`` keeps it armed (typing). Records go to
``window.__frameProbe.records`` (also ``window.__lat``).
"""
from __future__ import annotations

import statistics

PROBE = """
(function () {
  if (window.__frameProbe) return;
  var P = window.__frameProbe = {records: [], armed: null, start: undefined};
  window.__lat = P.records;
  var ch = new MessageChannel(), pending = [];
  ch.port1.onmessage = function () { var r = pending.shift(); r.paint = performance.now() - r.t0; P.records.push(r); };
  function capture(e) {
    var a = P.armed;
    if (!a || (a.target && !(e.target instanceof Node && a.target.contains(e.target)))) return;
    if (P.start === undefined && a.start.indexOf(e.type) >= 0) P.start = e.timeStamp;
    if (a.react.indexOf(e.type) < 0) return;
    if (!a.persist) P.armed = null;
    var rec = {t0: P.start !== undefined ? P.start : e.timeStamp, type: e.type, tag: a.tag, handler0: performance.now()};
    P.start = undefined;
    var end = function () { if (rec.handler === undefined) rec.handler = performance.now() - rec.handler0; };
    window.addEventListener(e.type, end, {once: true});  /* bubbling: after the page's own handlers */
    requestAnimationFrame(function () {
      end(); rec.raf = performance.now() - rec.t0; pending.push(rec); ch.port2.postMessage(0);
    });
  }
  ["keydown", "pointerdown", "pointerup", "pointerover", "pointermove", "mouseover", "mousemove",
   "input", "change", "click"].forEach(function (t) { window.addEventListener(t, capture, true); });
  P.arm = function (o) {
    P.start = undefined;
    P.armed = {start: o.start, react: o.react, target: o.target || null, persist: !!o.persist, tag: o.tag || ""};
  };
})();
"""


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def summary(xs: list[float]) -> dict:
    """Median and p90 of a list of ms, rounded to 0.1 ms."""
    return {"n": len(xs), "median_ms": round(statistics.median(xs), 1), "p90_ms": round(percentile(xs, 0.9), 1)}

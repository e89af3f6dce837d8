/* attnlib vector explorer: the reader's own query, keys and values; every number is computed here
   by the shared attention engine (window.attnlibEngine) as the reader types or drags. Defines
   window.attnlibVectors (the start-up of one explorer) once, like the kit, so that a page with
   several vector explorers needs one copy of this file; vectors_boot.js starts each output.
   Version 2 refuses numbers the arithmetic cannot take: an older definition on the page (a stored
   output beside a re-run cell in JupyterLab) is replaced, as the kit's is. */
window.attnlibVectors = window.attnlibVectors && window.attnlibVectors.version >= 2 ?
  window.attnlibVectors : (function () {
  "use strict";
  var K = window.attnlibKit, E = window.attnlibEngine;

  function init(root, P) {
    var uid = K.uid(root), pal = K.palette(P.palette), D = P.digits, S = null,
      R = { qk: null, v: null };
    /* every number the reader sets stays in [-LIMIT, LIMIT] (typed, dragged or moved by a key): the
       arithmetic stays finite (1e308 typed in overflowed q.k to Infinity, then NaN weights). A
       payload from before maxAbs (a stored output this file starts in JupyterLab) gets the same
       range. */
    var LIMIT = P.maxAbs || 1000;
    function clamp(x) { return Math.max(-LIMIT, Math.min(LIMIT, x)); }

    function copyState(e) {
      var x = P.examples[e];
      return { ex: e, q: x.q.slice(), K: x.K.map(function (r) { return r.slice(); }),
        V: x.V ? x.V.map(function (r) { return r.slice(); }) : null, keys: x.keys.slice(),
        query: x.query, scaled: x.scale, sel: -1 };
    }
    function same(a, b) { return JSON.stringify([a.q, a.K, a.V, a.keys, a.scaled, a.sel]) ===
      JSON.stringify([b.q, b.K, b.V, b.keys, b.scaled, b.sel]); }
    function flat(rows) { var out = []; rows.forEach(function (r) { out.push.apply(out, r); });
      return Float64Array.from(out); }
    function dims() { return { dk: S.q.length, Tk: S.K.length, dv: S.V ? S.V[0].length : 0 }; }
    /* the whole computation: raw q.k, the (scaled) scores, softmax weights, output */
    function compute() {
      var d = dims(), q = Float64Array.from(S.q), Kf = flat(S.K), Vf = S.V ?
        flat(S.V) : new Float64Array(d.Tk);
      var r = E.attention(q, Kf, Vf, 1, d.Tk, d.dk, Math.max(1, d.dv),
        { scale: S.scaled ? null : 1 });
      return { dots: E.matmulT(q, Kf, 1, d.dk, d.Tk), scores: r.scores, w: r.weights,
        out: S.V ? r.out : null };
    }
    /* a plane's window: the box around the points (and the origin, for
       arrows), padded, one scale for
       both axes so that angles and lengths read true */
    function box(pts, origin) {
      var x0 = origin ? 0 : Infinity, x1 = origin ? 0 : -Infinity, y0 = x0, y1 = x1;
      pts.forEach(function (p) { x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]); y0 = Math.min(y0,
        p[1]); y1 = Math.max(y1, p[1]); });
      var span = Math.max(x1 - x0, y1 - y0, 0.5) * 1.25, cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      return { x0: cx - span / 2, x1: cx + span / 2, y0: cy - span / 2,
        y1: cy + span / 2, span: span };
    }
    function fitRanges() {
      R.qk = box([S.q].concat(S.K), true);
      if (S.V && S.V[0].length === 2) {
        var r = compute();
        R.v = box(S.V.concat(r.out ? [Array.from(r.out)] : []), false);
      }
    }
    function qName() { return S.query === "q" ? "q" : "q " + K.shown(S.query, 10); }
    function num(x) { return String(Number((+x).toFixed(4))); }
    function vec(xs, d) { return "[" + Array.prototype.map.call(xs, function (x) { return K.fmt(x,
      d === undefined ? D : d); }).join(", ") + "]"; }

    /* ---- the frame ---- */
    if (P.title) K.div("attnlib-title", root, P.title);
    var controls = K.div("attnlib-controls", root), select = null;
    if (P.examples.length > 1) {
      select = K.picker(controls, "start from", P.examples.map(function (x) {
        return x.name; }), function (e) {
        S = copyState(e); fitRanges(); rebuild();
      });
    }
    var dkRange = K.slider(controls, "d\u2096 (width of q and k)",
      { label: "d_k, the number of components of the query and of every key", min: 1, max: P.maxDk,
      text: String, valueText: function (d) { return "d_k " + d; }, oninput: function (d) {
        while (S.q.length < d) { S.q.push(0); S.K.forEach(function (r) { r.push(0); }); }  /* new
           components start at 0 */
        while (S.q.length > d) { S.q.pop(); S.K.forEach(function (r) { r.pop(); }); }
        fitRanges(); rebuild();
      } });
    var scaleBtn = K.button("attnlib-vectors-scale", controls, "scale by 1/\u221ad\u2096",
      "divide the scores by the square root of d_k", function () {
      S.scaled = !S.scaled; rebuild();
    });
    var addBtn = K.button("attnlib-vectors-add", controls, "+ key",
      "add a key (and its value), all zeros", function () {
      var d = dims();
      S.K.push(new Array(d.dk).fill(0));
      if (S.V) S.V.push(new Array(d.dv).fill(0));
      var n = S.K.length - 1;
      while (S.keys.indexOf("k" + n) >= 0) n++;
      S.keys.push("k" + n); S.sel = S.K.length - 1; rebuild();
    });
    var delBtn = K.button("attnlib-vectors-del", controls, "\u2212 key",
      "remove the selected key (or the last one)", function () {
      var j = S.sel >= 0 ? S.sel : S.K.length - 1;
      S.K.splice(j, 1); if (S.V) S.V.splice(j, 1); S.keys.splice(j, 1);
      S.sel = -1; fitRanges(); rebuild();
    });
    var resetBtn = K.button("attnlib-vectors-reset", controls, "reset",
      "back to the starting numbers", function () {
      S = copyState(S.ex); fitRanges(); rebuild();
    });
    var formula = K.div("attnlib-vectors-formula", root);
    var planes = K.div("attnlib-vectors-planes", root);
    var strip = K.div("attnlib-figure", root);
    var tables = K.div("attnlib-vectors-tables", root);
    var note = K.div("attnlib-invalid-note", root); /* why a number typed was refused */
    note.setAttribute("role", "status"); note.style.display = "none";
    var outLine = K.div("attnlib-vectors-out", root);
    outLine.setAttribute("aria-live", "polite");
    var tip = K.tip(root), inputs = [], cells = { res: [] };

    /* ---- tables: the reader's numbers (inputs) and what the page computes from them ---- */
    function numberInput(parent, get, label, set) {
      var inp = K.numberBox(parent, { cls: "attnlib-vectors-num", label: label, value: get(),
        step: 0.1, text: num, note: note, refill: true, min: -LIMIT, max: LIMIT,
        onvalue: function (x) { set(x); update(); }, done: refit });
      inp._get = get;
      inputs.push(inp);
      return inp;
    }
    function vectorCell(row, arr, who) {
      var td = K.div("attnlib-vectors-vec", row, undefined, "td");
      arr.forEach(function (x, c) {
        numberInput(td, function () { return arr[c]; }, who + ", component " + (c + 1),
          function (v) { arr[c] = v; });
      });
    }
    function buildTables() {
      tables.textContent = ""; inputs = [];
      note.textContent = ""; note.style.display = "none";
      var d = dims();
      var t1 = K.div("attnlib-vectors-table", tables, undefined, "table");
      K.div("", t1, "your vectors (edit them)", "caption");
      var hr = K.div("", t1, undefined, "tr");
      ["", "k (key)"].concat(S.V ? ["v (value)"] : []).forEach(function (h) {
        K.div("", hr, h, "th"); });
      var qr = K.div("attnlib-vectors-qrow", t1, undefined, "tr");
      K.div("attnlib-vectors-name attnlib-q", qr, qName(), "th");
      vectorCell(qr, S.q, "query " + S.query);
      if (S.V) K.div("", qr, "", "td");
      S.K.forEach(function (k, j) {
        var r = K.div(j === S.sel ? "attnlib-vectors-sel" : "", t1, undefined, "tr");
        K.div("attnlib-vectors-name attnlib-k", r, K.shown(S.keys[j], 10), "th");
        vectorCell(r, k, "key " + S.keys[j]);
        if (S.V) vectorCell(r, S.V[j], "value " + S.keys[j]);
      });
      var t2 = K.div("attnlib-vectors-table attnlib-vectors-results", tables, undefined, "table");
      K.div("", t2, "what the page computes", "caption");
      var h2 = K.div("", t2, undefined, "tr");
      ["", "q\u00b7k", S.scaled ? "\u00f7\u221a" + d.dk : "not scaled", "weight"].concat(S.V ?
        ["weight \u00d7 v"] : []).forEach(function (h) { K.div("", h2, h, "th"); });
      cells.res = S.K.map(function (_, j) {
        var r = K.div(j === S.sel ? "attnlib-vectors-sel" : "", t2, undefined, "tr");
        K.div("attnlib-vectors-name attnlib-k", r, K.shown(S.keys[j], 10), "th");
        var c = { dot: K.div("attnlib-vectors-n", r, "", "td"), score: K.div("attnlib-vectors-n", r,
          "", "td"), w: K.div("attnlib-vectors-w", r, undefined, "td") };
        c.bar = K.div("attnlib-bar-fill", K.div("attnlib-bar-track", c.w));
        c.wv = K.div("attnlib-vectors-n", c.w, "", "span");
        if (S.V) c.mix = K.div("attnlib-vectors-n", r, "", "td");
        return c;
      });
    }

    /* ---- the planes (2-D only): query and keys; values and the output. Built once per layout,
       moved in place while the reader drags (a rebuilt handle would lose the pointer) ---- */
    var PL = null;
    function tickStep(span) { var raw = span / 4, p = Math.pow(10, Math.floor(Math.log10(raw))),
      f = raw / p; return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p; }
    function plane(title, bx, side, cls) {
      var wrap = K.div("attnlib-vectors-plane " + cls, planes), top = 18, pad = 22;
      var s = K.el("svg", { "class": "attnlib-plane", width: side, height: side + top,
        viewBox: "0 0 " + side + " " + (side + top), role: "group", "aria-label": title }, wrap);
      K.el("text", { "class": "attnlib-plane-title", x: 2, y: 12 }, s, title);
      var sc = (side - 2 * pad) / bx.span, g = K.el("g",
        { transform: "translate(0 " + top + ")" }, s);
      var X = function (v) { return pad + (v - bx.x0) * sc; }, Y = function (v) {
        return pad + (bx.y1 - v) * sc; };
      var st = tickStep(bx.span), t;
      K.el("rect", { "class": "attnlib-plane-frame", x: pad, y: pad, width: side - 2 * pad,
        height: side - 2 * pad, fill: "none" }, g);
      for (t = Math.ceil(bx.x0 / st) * st; t <= bx.x1 + 1e-9; t += st) {
        K.el("line", { "class": Math.abs(t) < st / 100 ? "attnlib-plane-axis" :
          "attnlib-plane-grid", x1: X(t), x2: X(t), y1: pad, y2: side - pad }, g);
        K.el("text", { "class": "attnlib-plane-tick", x: X(t), y: side - pad + 13, "text-anchor":
          "middle" }, g, String(+t.toFixed(6)));
      }
      for (t = Math.ceil(bx.y0 / st) * st; t <= bx.y1 + 1e-9; t += st) {
        K.el("line", { "class": Math.abs(t) < st / 100 ? "attnlib-plane-axis" :
          "attnlib-plane-grid", y1: Y(t), y2: Y(t), x1: pad, x2: side - pad }, g);
        K.el("text", { "class": "attnlib-plane-tick", x: pad - 3, y: Y(t) + 4, "text-anchor":
          "end" }, g, String(+t.toFixed(6)));
      }
      return { svg: s, g: g, x: X, y: Y, pad: pad, side: side, inv: function (px, py) {
        return [bx.x0 + (px - pad) / sc, bx.y1 - (py - top - pad) / sc]; }, bx: bx };
    }
    function handle(pl, get, cls, label) {
      var h = K.el("circle", { "class": "attnlib-handle " + cls, r: 8, tabindex: "0",
        role: "button", "aria-roledescription": "draggable point" }, pl.g);
      function set(x, y) { var a = get(); a[0] = clamp(x); a[1] = clamp(y); update(); }
      h.addEventListener("pointerdown", function (e) { e.preventDefault();
        h.setPointerCapture(e.pointerId); h._drag = true; h.focus(); });
      h.addEventListener("pointermove", function (e) {
        if (!h._drag) return;
        var p = pl.svg.createSVGPoint();
        p.x = e.clientX; p.y = e.clientY;
        p = p.matrixTransform(pl.svg.getScreenCTM().inverse());
        var xy = pl.inv(p.x, p.y), b = pl.bx, m = 0.15 * b.span;
        /* a pointer is not that precise: its position to 3 decimals */
        set(+Math.max(b.x0 - m, Math.min(b.x1 + m, xy[0])).toFixed(3), +Math.max(b.y0 - m,
          Math.min(b.y1 + m, xy[1])).toFixed(3));
      });
      function drop() { if (h._drag) { h._drag = false; refit(); } }
      h.addEventListener("pointerup", drop);
      h.addEventListener("pointercancel", drop);
      h.addEventListener("keydown", function (e) {
        var st = e.shiftKey ? 0.01 : 0.1, dx = { ArrowLeft: -st, ArrowRight: st }[e.key] || 0,
          dy = { ArrowDown: -st, ArrowUp: st }[e.key] || 0;
        if (!dx && !dy) return;
        e.preventDefault();
        var a = get();
        set(dx ? +(a[0] + dx).toFixed(6) : a[0], dy ? +(a[1] + dy).toFixed(6) : a[1]);
      });
      h._label = label;
      return h;
    }
    function arrowItem(pl, cls, name, sel) {
      return { line: K.el("line", { "class": "attnlib-arrow " + cls + (sel ? " attnlib-arrow-sel" :
        "") }, pl.g), text: K.el("text", { "class": "attnlib-plane-label " + cls },
        pl.g, K.shown(name, 10)) };
    }
    function drawPlanes() {
      planes.textContent = ""; PL = null;
      var d = dims(), w = K.width(root), both = d.dk === 2 && d.dv === 2;
      var side = Math.min(300, both && w >= 560 ? Math.floor(w / 2) - 12 : w - 4);
      PL = { keys: [], vals: [] };
      if (d.dk === 2) {
        var pq = plane("query and keys (drag them)", R.qk, side, "attnlib-vectors-qk");
        PL.pq = pq;
        S.K.forEach(function (k, j) { PL.keys.push(arrowItem(pq, "attnlib-k",
          S.keys[j], j === S.sel)); });
        PL.q = arrowItem(pq, "attnlib-q", qName(), false);
        S.K.forEach(function (k, j) { PL.keys[j].h = handle(pq, function () { return S.K[j]; },
          "attnlib-k", "key " + S.keys[j]); });
        PL.q.h = handle(pq, function () { return S.q; }, "attnlib-q", "query " + S.query);
      }
      if (d.dv === 2 && R.v) {
        var pv = plane("values, and the output o (drag a value)", R.v, side, "attnlib-vectors-v");
        PL.pv = pv;
        S.V.forEach(function (v, j) {
          PL.vals.push({ disc: K.el("circle", { "class": "attnlib-vdisc" + (j === S.sel ?
            " attnlib-arrow-sel" : "") }, pv.g), text: K.el("text",
            { "class": "attnlib-plane-label attnlib-v" }, pv.g, K.shown(S.keys[j], 10)) });
        });
        PL.star = K.el("polygon", { "class": "attnlib-star" }, pv.g);
        PL.o = K.el("text", { "class": "attnlib-plane-label" }, pv.g, "");
        S.V.forEach(function (v, j) { PL.vals[j].h = handle(pv, function () { return S.V[j]; },
          "attnlib-v", "value " + S.keys[j]); });
      }
    }
    function place(item, pl, v) {
      var x = pl.x(v[0]), y = pl.y(v[1]), right = v[0] >= 0;
      item.line.setAttribute("x1", pl.x(0)); item.line.setAttribute("y1", pl.y(0));
      item.line.setAttribute("x2", x); item.line.setAttribute("y2", y);
      item.text.setAttribute("x", x + (right ? 10 : -10)); item.text.setAttribute("y", y - 9);
      item.text.setAttribute("text-anchor", right ? "start" : "end");
      placeHandle(item.h, pl, v);
    }
    function placeHandle(h, pl, v) {
      h.setAttribute("cx", pl.x(v[0])); h.setAttribute("cy", pl.y(v[1]));
      h.setAttribute("aria-label", h._label + " at (" + K.fmt(v[0], 2) + ", " + K.fmt(v[1],
        2) + "): drag it, or move it with the arrow keys (Shift: finer)");
    }
    /* labels beside their points without running into each other: the first free spot of right,
       left, above, below (boxes from the 12 px text's approximate width) */
    function placeLabels(items, pl, points) {
      var lo = pl.pad - 2, hi = pl.side - pl.pad + 2;
      var taken = (points || []).map(function (p) { return [p[0] - p[2], p[1] - p[2],
        p[0] + p[2], p[1] + p[2]]; });
      items.forEach(function (it) {
        var w = K.CHAR_W * it.text.textContent.length, h = 12, d = it.gap || 9,
          x = it.x, y = it.y, best = null;
        var spots = [[x + d, y - 4, "start"], [x - d, y - 4, "end"], [x, y - d - 2, "middle"],
          [x, y + d + 10, "middle"], [x + d, y + 12, "start"], [x - d, y + 12, "end"],
          [x + d, y - 16, "start"], [x - d, y - 16, "end"]];
        if (it.prefer === "left") spots.unshift(spots.splice(1, 1)[0]);
        for (var k = 0; k < spots.length && !best; k++) {
          var sp = spots[k], x0 = sp[2] === "start" ? sp[0] : sp[2] === "end" ?
            sp[0] - w : sp[0] - w / 2;
          var b = [x0, sp[1] - h + 2, x0 + w, sp[1] + 2];
          var inside = b[0] >= lo && b[2] <= hi && b[1] >= lo && b[3] <= hi;
          if (inside && !taken.some(function (o) { return b[0] < o[2] && o[0] < b[2] &&
            b[1] < o[3] && o[1] < b[3]; })) best = [sp, b];
        }
        if (!best) { var sp0 = spots[0]; best = [sp0, [sp0[0], sp0[1] - h, sp0[0] + w, sp0[1]]]; }
        it.text.setAttribute("x", best[0][0]); it.text.setAttribute("y", best[0][1]);
        it.text.setAttribute("text-anchor", best[0][2]);
        taken.push(best[1]);
      });
    }
    function positionPlanes(r) {
      if (!PL) return;
      if (PL.pq) {
        S.K.forEach(function (k, j) { place(PL.keys[j], PL.pq, k); });
        place(PL.q, PL.pq, S.q);
        placeLabels([PL.q].concat(PL.keys).map(function (it, n) {
          var v = n === 0 ? S.q : S.K[n - 1];
          return { text: it.text, x: PL.pq.x(v[0]), y: PL.pq.y(v[1]), prefer: v[0] < 0 ?
            "left" : "right", gap: 11 };
        }), PL.pq, [S.q].concat(S.K).map(function (v) {
        return [PL.pq.x(v[0]), PL.pq.y(v[1]), 8]; }));
      }
      if (PL.pv) {
        var pv = PL.pv;
        S.V.forEach(function (v, j) {
          var rad = 3 + 13 * Math.sqrt(r.w[j]), it = PL.vals[j];
          it.disc.setAttribute("cx", pv.x(v[0])); it.disc.setAttribute("cy", pv.y(v[1]));
          it.disc.setAttribute("r", rad.toFixed(2));
          placeHandle(it.h, pv, v);
        });
        var ox = pv.x(r.out[0]), oy = pv.y(r.out[1]), pts = [];
        for (var n = 0; n < 10; n++) {
          var a = Math.PI / 2 + n * Math.PI / 5, rr = n % 2 ? 4 : 10;
          pts.push((ox + rr * Math.cos(a)).toFixed(1) + "," + (oy - rr * Math.sin(a)).toFixed(1));
        }
        PL.star.setAttribute("points", pts.join(" "));
        PL.o.textContent = "o " + vec(r.out, 2);
        var discs = S.V.map(function (v, j) { return [pv.x(v[0]), pv.y(v[1]),
          3 + 13 * Math.sqrt(r.w[j])]; });
        placeLabels([{ text: PL.o, x: ox, y: oy, gap: 12 }].concat(S.V.map(function (v, j) {
          return { text: PL.vals[j].text, x: discs[j][0], y: discs[j][1], gap: discs[j][2] + 2 };
        })), pv, discs.concat([[ox, oy, 10]]));
      }
    }
    function refit() { /* a new range after a drag or an edit: rebuild the planes, keep the focus */
      var f = document.activeElement, cls = f && f.getAttribute && f.getAttribute("class"), i = -1;
      if (PL && cls && /attnlib-handle/.test(cls)) {
        var all = Array.prototype.slice.call(planes.querySelectorAll("circle.attnlib-handle"));
        i = all.indexOf(f);
      }
      fitRanges(); drawPlanes(); positionPlanes(compute());
      if (i >= 0) { var again = planes.querySelectorAll("circle.attnlib-handle")[i];
        if (again) again.focus(); }
    }

    /* ---- the weights as a one-row heatmap (the explorer's matrix) ---- */
    var hm = null, stripCur = [0, 0];
    function drawStrip(r) {
      var focused = hm && document.activeElement === hm.svg;
      strip.textContent = "";
      hm = K.heatmap({ parent: strip, avail: K.width(root), rows: [qName()], cols: S.keys,
        palette: pal, lo: 0, hi: 1, digits: D, value: function (i, j) { return r.w[j]; }, label:
        "softmax weights of the query over the " + S.keys.length + " keys (d_k = " + dims().dk +
          (S.scaled ? ", scores divided by the square root of d_k" : ", scores not scaled") +
            "); Enter selects a key",
        cellMax: 64, cellMin: 24, cellText: true, hatchId: "attnlib-hatch-" + uid, rowWord: "query",
        colTitle: "weight = softmax(q\u00b7k" + (S.scaled ? " / \u221a" +
          dims().dk : "") + ") on each key",
        selectedCol: S.sel, colLabelAngle: 0, rowLabelClass: "attnlib-qlabel", cursor: stripCur,
        onCell: function (i, j) { S.sel = S.sel === j ? -1 : j; rebuild(); },
        onHover: function (i, j, rect) {
          tip.show(rect, ["key " + K.quoted(S.keys[j]) + " (" + j + ")", "weight = " + K.fmt(r.w[j],
            D), "q\u00b7k = " + K.fmt(r.dots[j], D) + (S.scaled ? ", \u00f7\u221a" + dims().dk +
            " = " + K.fmt(r.scores[j], D) : " (not scaled)")], strip);
        },
        onLeave: tip.hide });
      if (focused) hm.svg.focus(); /* the keyboard stays where it was */
    }

    function paintNumbers(r) {
      var d = dims(), sum = 0;
      cells.res.forEach(function (c, j) {
        c.dot.textContent = K.fmt(r.dots[j], D);
        c.score.textContent = K.fmt(r.scores[j], D);
        c.bar.style.width = (100 * r.w[j]).toFixed(1) + "%";
        c.bar.style.background = K.colour(pal, r.w[j], 0, 1);
        c.wv.textContent = K.fmt(r.w[j], D);
        if (c.mix) c.mix.textContent = vec(S.V[j].map(function (x) { return r.w[j] * x; }));
        sum += r.w[j];
      });
      formula.textContent = "weight\u2c7c = softmax\u2c7c(q\u00b7k\u2c7c" + (S.scaled ?
        " / \u221a" + d.dk : "") + ")" + (S.scaled ? "" :
        "   (scaling off: the raw dot products go into the softmax)");
      outLine.textContent = "";
      if (r.out) {
        K.div("", outLine, "output o = \u03a3\u2c7c weight\u2c7c \u00d7 v\u2c7c = ", "span");
        K.div("attnlib-vectors-o", outLine, vec(r.out), "b");
      }
      K.div("", outLine, "   (the weights sum to " + K.fmt(sum, D) + ")", "span");
    }
    function stateString() {
      var h = 2166136261, s = JSON.stringify([S.q, S.K, S.V]);
      for (var i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
      var d = dims();
      return ["example=" + S.ex, "dk=" + d.dk, "dv=" + d.dv, "keys=" + d.Tk, "scaled=" + (S.scaled ?
        1 : 0), "key=" + S.sel, "numbers=" + h.toString(16)].join(";");
    }
    function update() { /* the numbers changed: recompute and redraw everything but the inputs */
      var r = compute();
      inputs.forEach(function (inp) { inp.set(inp._get()); });
      drawStrip(r); paintNumbers(r); positionPlanes(r);
      resetBtn.disabled = same(S, copyState(S.ex));
      root.setAttribute("data-state", stateString());
    }
    function rebuild() {
      tip.hide();
      var d = dims();
      dkRange.show(d.dk);
      K.toggle(scaleBtn, S.scaled);
      addBtn.disabled = d.Tk >= P.maxKeys; delBtn.disabled = d.Tk <= 1;
      if (select) select.value = String(S.ex);
      buildTables(); drawPlanes(); update();
    }

    /* for the tests and the curious: the page's numbers */
    root.attnlibVectors = {
      state: function () { return JSON.parse(JSON.stringify({ q: S.q, K: S.K, V: S.V,
        scaled: S.scaled })); },
      numbers: function () { var r = compute(); return { dots: Array.from(r.dots), scores:
        Array.from(r.scores), weights: Array.from(r.w), out: r.out ? Array.from(r.out) : null }; }
    };
    K.keepKeys(root);
    S = copyState(0); fitRanges(); rebuild();
    K.onResize(root, rebuild);
  }

  init.version = 2;
  return init;
})();

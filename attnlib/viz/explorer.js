/* attnlib attention explorer: draws precomputed states as SVG. No globals, no network, no eval.
   Every string from the payload reaches the page through textContent / setAttribute (escaped). */
(function () {
  "use strict";
  /* the SVG namespace, read from the HTML parser so that the output holds no URL at all: a search
     of a book page for addresses then finds only real links */
  var SVGNS = (function () { var t = document.createElement("div"); t.innerHTML = "<svg></svg>"; return t.firstChild.namespaceURI; })();
  var CHAR_W = 7; /* approximate width of one 12px character, for layout without measuring */

  function el(tag, attrs, parent, text) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, attrs[k]); }
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function div(cls, parent, text, tag) {
    var node = document.createElement(tag || "div");
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function shown(tok, width) {
    var s = String(tok).replace(/\n/g, "\u23ce").replace(/\t/g, "\u21e5");
    if (!s.trim()) s = s.replace(/ /g, "\u2423") || "\u2205";
    return s.length > width ? s.slice(0, width - 1) + "\u2026" : s;
  }
  function quoted(tok) { return "\u201c" + String(tok) + "\u201d"; }

  function decode(ex, digits) {
    /* -> {k: Float64Array of integer codes (value * 10^digits), or NaN for sentinels, kind: Int8Array} */
    var bin = atob(ex.data), nb = ex.bytes, n = bin.length / nb;
    var top = Math.pow(2, 8 * nb) - 1, k = new Float64Array(n), kind = new Int8Array(n);
    for (var i = 0; i < n; i++) {
      var u = 0;
      for (var b = nb - 1; b >= 0; b--) u = u * 256 + bin.charCodeAt(i * nb + b);
      if (u === top) { kind[i] = -1; k[i] = -Infinity; }        /* -inf: masked */
      else if (u === top - 1) { kind[i] = 1; k[i] = Infinity; } /* +inf */
      else if (u === top - 2) { kind[i] = 2; k[i] = NaN; }      /* NaN */
      else k[i] = u + ex.base;
    }
    return { k: k, kind: kind };
  }

  function fmtCode(code, digits) {
    /* exact decimal text of code / 10^digits (no floating-point noise) */
    var neg = code < 0, a = Math.abs(code), p = Math.pow(10, digits);
    var ip = Math.floor(a / p), fp = String(a - ip * p);
    while (fp.length < digits) fp = "0" + fp;
    return (neg ? "-" : "") + ip + (digits > 0 ? "." + fp : "");
  }
  function fmt(kind, code, digits) {
    if (kind === -1) return "-\u221e (masked)";
    if (kind === 1) return "+\u221e";
    if (kind === 2) return "NaN";
    return fmtCode(code, digits);
  }
  function fmtTick(x) { return String(Number(x.toPrecision(3))); }

  function init(root) {
    root.setAttribute("data-attnlib-ready", "1");
    var P = JSON.parse(root.querySelector("script.attnlib-data").textContent);
    var ns = root.querySelector(".attnlib-noscript");
    if (ns) ns.parentNode.removeChild(ns);
    /* ids of runtime-made <pattern>/<linearGradient> must differ between copies of one output */
    window.__attnlibExplorerCount = (window.__attnlibExplorerCount || 0) + 1;
    var uid = (root.getAttribute("data-attnlib-uid") || "x") + "-" + window.__attnlibExplorerCount;
    var palette = [];
    for (var i = 0; i < 256; i++) palette.push("#" + P.palette.substr(6 * i, 6));
    var scale = Math.pow(10, P.digits), span = P.vmax - P.vmin;
    function colourIndex(v) {
      var t = (v - P.vmin) / span;
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      return Math.min(255, Math.floor(t * 256));
    }
    function isDark(hex) {
      var r = parseInt(hex.substr(1, 2), 16), g = parseInt(hex.substr(3, 2), 16), b = parseInt(hex.substr(5, 2), 16);
      return 0.2126 * r + 0.7152 * g + 0.0722 * b < 128;
    }
    var decoded = [];
    function values(e) { if (!decoded[e]) decoded[e] = decode(P.examples[e], P.digits); return decoded[e]; }

    var state = { ex: 0, idx: P.dims.map(function () { return 0; }), row: -1, cur: [0, 0] };

    /* ---- static frame: title, controls, figure, bars, tooltip ---- */
    if (P.title) div("attnlib-title", root, P.title);
    var controls = div("attnlib-controls", root);
    var select = null, sliders = [];
    if (P.examples.length > 1) {
      var lab = div("attnlib-control", controls, undefined, "label");
      div("", lab, "example", "span");
      select = div("", lab, undefined, "select");
      P.examples.forEach(function (ex, j) { var o = div("", select, ex.name, "option"); o.value = String(j); });
      select.addEventListener("change", function () { state.ex = +select.value; state.row = -1; state.cur = [0, 0]; build(); });
    }
    P.dims.forEach(function (d, j) {
      if (d.labels.length < 2) { sliders.push(null); return; }
      var lab = div("attnlib-control", controls, undefined, "label");
      div("", lab, d.name, "span");
      var r = div("", lab, undefined, "input");
      r.type = "range"; r.min = "0"; r.max = String(d.labels.length - 1); r.step = "1"; r.value = "0";
      r.setAttribute("aria-label", d.name);
      var out = div("", lab, d.labels[0], "output");
      r.addEventListener("input", function () {
        state.idx[j] = +r.value; out.textContent = d.labels[state.idx[j]];
        r.setAttribute("aria-valuetext", d.name + " " + d.labels[state.idx[j]]);
        paint();
      });
      sliders.push(r);
    });
    var clear = div("attnlib-clear", controls, "clear row", "button");
    clear.type = "button";
    clear.title = "Clear the highlighted query row (Esc)";
    clear.addEventListener("click", function () { selectRow(-1); });

    var body = div("attnlib-body", root);
    var figure = div("attnlib-figure", body);
    var bars = div("attnlib-bars", body);
    var tip = div("attnlib-tooltip", root);
    tip.setAttribute("role", "status");

    var svg = null, cbar = null, cells = [], cellText = [], rowLabels = [], rowBox = null, rowInner = null, cursor = null, geo = null;

    function build() {
      var ex = P.examples[state.ex], tq = ex.rows.length, tk = ex.cols.length;
      hideTip(); /* its cell index belonged to the previous example's grid */
      figure.textContent = "";
      var maxRow = 0, maxCol = 0;
      ex.rows.forEach(function (t) { maxRow = Math.max(maxRow, shown(t, 14).length); });
      ex.cols.forEach(function (t) { maxCol = Math.max(maxCol, shown(t, 14).length); });
      var rowW = 10 + CHAR_W * maxRow, colH = Math.ceil(0.72 * (CHAR_W * maxCol + 8));
      /* cells fitted to the width the page gives (less the colour bar), so the drawing is never
         shrunk and its 12 px labels stay 12 px on a phone */
      var avail = Math.max(240, root.clientWidth || 640) - 78, fit = function (l) { return Math.floor((avail - l - 6) / tk); };
      var cell = Math.max(8, Math.min(34, Math.floor(440 / Math.max(tq, tk)), fit(rowW + 18)));
      var left = Math.max(rowW + 18, colH - cell / 2 + 4);
      cell = Math.max(8, Math.min(cell, fit(left)));
      left = Math.max(rowW + 18, colH - cell / 2 + 4);
      var rowStep = Math.max(1, Math.ceil(13 / cell)), colStep = rowStep, top = 4;
      var W = left + tk * cell + 6, H = top + tq * cell + colH + 20;
      geo = { cell: cell, left: left, top: top, tq: tq, tk: tk };
      svg = el("svg", { "class": "attnlib-plot", width: W, height: H, viewBox: "0 0 " + W + " " + H,
        tabindex: "0", role: "group", focusable: "true",
        "aria-label": (P.title ? P.title + ": " : "") + P.valueName + " matrix, " + tq + " queries by " + tk +
          " keys. Arrow keys move, Enter highlights the query row, Escape clears." }, figure);
      var defs = el("defs", {}, svg);
      var pat = el("pattern", { id: "attnlib-hatch-" + uid, width: "6", height: "6",
        patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
      el("rect", { "class": "attnlib-hatch-bg", width: "6", height: "6", fill: "#e6e6e6" }, pat);
      el("line", { "class": "attnlib-hatch-fg", x1: "0", y1: "0", x2: "0", y2: "6", stroke: "#8c8c8c", "stroke-width": "2.5" }, pat);
      var grid = el("g", {}, svg);
      cells = []; cellText = []; rowLabels = [];
      var gap = cell >= 14 ? 1 : 0;
      for (var i = 0; i < tq; i++) {
        for (var j = 0; j < tk; j++) {
          var c = el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * cell,
            width: cell - gap, height: cell - gap, "data-row": i, "data-col": j }, grid);
          cells.push(c);
          if (cell >= 30) cellText.push(el("text", { "class": "attnlib-celltext", x: left + j * cell + (cell - gap) / 2,
            y: top + i * cell + (cell - gap) / 2 + 3.5, "text-anchor": "middle" }, grid, ""));
        }
      }
      for (i = 0; i < tq; i++) {
        var t = el("text", { "class": "attnlib-rowlabel", x: left - 5, y: top + i * cell + cell / 2 + 4,
          "text-anchor": "end", tabindex: "0", role: "button", "data-row": i,
          "aria-label": "query " + i + ": " + ex.rows[i] }, svg, shown(ex.rows[i], 14));
        el("title", {}, t, "query " + i + ": " + quoted(ex.rows[i]));
        if (i % rowStep) t.setAttribute("visibility", "hidden");
        rowLabels.push(t);
      }
      for (j = 0; j < tk; j += colStep) {
        var x = left + j * cell + cell / 2 + 4, y = top + tq * cell + 8;
        var ct = el("text", { "class": "attnlib-collabel", x: x, y: y, "text-anchor": "end",
          transform: "rotate(-45 " + x + " " + y + ")" }, svg, shown(ex.cols[j], 14));
        el("title", {}, ct, "key " + j + ": " + quoted(ex.cols[j]));
      }
      el("text", { "class": "attnlib-axis", x: left + tk * cell / 2, y: H - 2, "text-anchor": "middle" }, svg, "key");
      var qx = 10, qy = top + tq * cell / 2;
      el("text", { "class": "attnlib-axis", x: qx, y: qy, "text-anchor": "middle",
        transform: "rotate(-90 " + qx + " " + qy + ")" }, svg, "query");
      /* the highlighted query row: a black frame with a white inner line, visible on any colour */
      rowBox = el("rect", { "class": "attnlib-rowbox", x: left - 1.5, width: tk * cell + 2 - gap, height: cell + 2 - gap,
        fill: "none", stroke: "#000", "stroke-width": "3", visibility: "hidden", "pointer-events": "none" }, svg);
      rowInner = el("rect", { "class": "attnlib-rowinner", x: left + 0.5, width: tk * cell - 2 - gap, height: cell - 2 - gap,
        fill: "none", stroke: "#fff", "stroke-width": "1", visibility: "hidden", "pointer-events": "none" }, svg);
      cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: cell - gap, fill: "none",
        stroke: "#e66100", "stroke-width": "2", "stroke-dasharray": "3 2", visibility: "hidden",
        "pointer-events": "none" }, svg);
      buildColourbar(Math.max(120, Math.min(260, tq * cell)));
      wire();
      paint();
    }

    function buildColourbar(h) {
      var gid = "attnlib-grad-" + uid, w = 14, x0 = 6, y0 = 4;
      cbar = el("svg", { "class": "attnlib-colorbar", width: 72, height: h + 52, "aria-hidden": "true" }, figure);
      var g = el("linearGradient", { id: gid, x1: "0", y1: "1", x2: "0", y2: "0" }, el("defs", {}, cbar));
      for (var s = 0; s <= 32; s++) el("stop", { offset: (s / 32).toFixed(4), "stop-color": palette[Math.min(255, s * 8)] }, g);
      el("rect", { x: x0, y: y0, width: w, height: h, fill: "url(#" + gid + ")", stroke: "#888", "stroke-width": "0.5" }, cbar);
      [P.vmin, (P.vmin + P.vmax) / 2, P.vmax].forEach(function (v, i) {
        var y = y0 + h - (h * i) / 2;
        el("line", { x1: x0 + w, x2: x0 + w + 4, y1: y, y2: y, stroke: "currentColor" }, cbar);
        el("text", { x: x0 + w + 6, y: y + 4, "font-size": "11" }, cbar, fmtTick(v));
      });
      var lx = x0 + w + 46, ly = y0 + h / 2;
      el("text", { "class": "attnlib-axis", x: lx, y: ly, "text-anchor": "middle",
        transform: "rotate(-90 " + lx + " " + ly + ")" }, cbar, P.valueName);
      var sw = el("g", { "class": "attnlib-masked-key" }, cbar);
      el("rect", { x: x0, y: y0 + h + 14, width: w, height: w, fill: "url(#attnlib-hatch-" + uid + ")", stroke: "#888", "stroke-width": "0.5" }, sw);
      el("text", { x: x0 + w + 6, y: y0 + h + 25, "font-size": "11" }, sw, "masked");
    }

    function offset() {
      var o = 0;
      for (var j = 0; j < P.dims.length; j++) o = o * P.dims[j].labels.length + state.idx[j];
      return o * geo.tq * geo.tk;
    }
    function stateString() {
      var parts = ["example=" + state.ex];
      P.dims.forEach(function (d, j) { parts.push(d.name + "=" + state.idx[j]); });
      parts.push("row=" + state.row);
      return parts.join(";");
    }

    function paint() {
      var V = values(state.ex), base = offset(), hasMasked = false, hatch = "url(#attnlib-hatch-" + uid + ")";
      for (var n = 0; n < cells.length; n++) {
        var kind = V.kind[base + n], code = V.k[base + n], fill;
        if (kind === -1 || kind === 2) { fill = hatch; hasMasked = true; }
        else fill = palette[kind === 1 ? 255 : colourIndex(code / scale)];
        cells[n].setAttribute("fill", fill);
        cells[n].setAttribute("data-value", kind === 0 ? fmtCode(code, P.digits) : (kind === -1 ? "-inf" : kind === 1 ? "inf" : "nan"));
        if (cellText.length) {
          cellText[n].textContent = kind === 0 ? fmtCode(code, P.digits).replace(/^(-?\d+\.\d{2})\d*$/, "$1") : (kind === -1 ? "-\u221e" : "");
          cellText[n].style.fill = fill.charAt(0) === "#" && isDark(fill) ? "#fff" : "#000"; /* style: CSS beats attributes */
        }
      }
      var mk = cbar.querySelector(".attnlib-masked-key");
      mk.setAttribute("visibility", hasMasked ? "visible" : "hidden");
      rowLabels.forEach(function (t, i) { t.setAttribute("class", "attnlib-rowlabel" + (i === state.row ? " attnlib-selected" : "")); });
      var vis = state.row >= 0 ? "visible" : "hidden";
      rowBox.setAttribute("y", geo.top + Math.max(0, state.row) * geo.cell - 1.5);
      rowInner.setAttribute("y", geo.top + Math.max(0, state.row) * geo.cell + 0.5);
      rowBox.setAttribute("visibility", vis);
      rowInner.setAttribute("visibility", vis);
      clear.disabled = state.row < 0;
      paintBars();
      if (tip.style.display === "block" && tip._cell !== undefined) showTip(tip._cell);
      root.setAttribute("data-state", stateString());
    }

    function paintBars() {
      var ex = P.examples[state.ex];
      bars.textContent = "";
      if (state.row < 0) { div("attnlib-hint", bars, "Click a query token (row label) or a cell to list its " + P.valueName + "s here."); return; }
      div("attnlib-bars-head", bars, "query " + quoted(ex.rows[state.row]) + " \u2192 " + P.valueName + "s over keys");
      var V = values(state.ex), base = offset() + state.row * geo.tk, m = Math.max(Math.abs(P.vmin), Math.abs(P.vmax));
      for (var j = 0; j < geo.tk; j++) {
        var kind = V.kind[base + j], code = V.k[base + j], v = code / scale;
        var row = div("attnlib-bar", bars);
        row.setAttribute("data-col", j);
        var tok = div("attnlib-bar-token", row, shown(ex.cols[j], 14));
        tok.title = "key " + j + ": " + quoted(ex.cols[j]);
        var track = div("attnlib-bar-track", row);
        if (kind === -1 || kind === 2) div("attnlib-bar-masked", track);
        else {
          var f = div("attnlib-bar-fill", track);
          /* bar length: |v| on a diverging scale (colour gives the sign), else position in [vmin, vmax] */
          var frac = kind === 1 ? 1 : Math.min(1, P.diverging ? Math.abs(v) / m : (v - P.vmin) / span);
          f.style.width = (100 * Math.max(0, frac)).toFixed(1) + "%";
          f.style.background = palette[kind === 1 ? 255 : colourIndex(v)];
        }
        div("attnlib-bar-value", row, kind === 0 ? fmtCode(code, P.digits) : fmt(kind, code, P.digits).split(" ")[0]);
      }
    }

    function showTip(n) {
      var ex = P.examples[state.ex], i = Math.floor(n / geo.tk), j = n % geo.tk;
      var V = values(state.ex), kind = V.kind[offset() + n], code = V.k[offset() + n];
      tip._cell = n;
      tip.textContent = "";
      div("attnlib-tip-tokens", tip, "query " + quoted(ex.rows[i]) + " (" + i + ") \u2192 key " + quoted(ex.cols[j]) + " (" + j + ")");
      var line = div("attnlib-tip-value", tip, P.valueName + " = ");
      div("attnlib-value", line, fmt(kind, code, P.digits), "b");
      var where = [];
      if (P.examples.length > 1) where.push(ex.name);
      P.dims.forEach(function (d, k) { if (d.labels.length > 1) where.push(d.name + " " + d.labels[state.idx[k]]); });
      if (where.length) div("attnlib-tip-where", tip, where.join(" \u00b7 "));
      tip.style.display = "block";
      /* beside the cell, never above the drawing: the title and the controls stay readable */
      var rb = root.getBoundingClientRect(), cb = cells[n].getBoundingClientRect(), floor = figure.getBoundingClientRect().top - rb.top;
      var x = cb.right - rb.left + 8, y = cb.top - rb.top - tip.offsetHeight - 6;
      if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, cb.left - rb.left - tip.offsetWidth - 8);
      if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, root.clientWidth - tip.offsetWidth);
      if (y < floor) y = cb.bottom - rb.top + 6;
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    }
    function hideTip() { tip.style.display = "none"; tip._cell = undefined; }

    function selectRow(i) { state.row = i; paint(); }
    function moveCursor(i, j) {
      state.cur = [Math.max(0, Math.min(geo.tq - 1, i)), Math.max(0, Math.min(geo.tk - 1, j))];
      var c = cells[state.cur[0] * geo.tk + state.cur[1]];
      cursor.setAttribute("x", c.getAttribute("x"));
      cursor.setAttribute("y", c.getAttribute("y"));
      cursor.setAttribute("visibility", "visible");
      showTip(state.cur[0] * geo.tk + state.cur[1]);
    }

    function wire() {
      window.attnlibWireHeatmap({ svg: svg, cursor: cursor, rowLabels: rowLabels, rows: geo.tq, cols: geo.tk,
        cur: function () { return state.cur; }, moveCursor: moveCursor, selectRow: selectRow,
        showTip: showTip, hideTip: hideTip });
    }

    window.attnlibKeepKeys(root, function () { return true; }, function () { selectRow(-1); });
    build();
    /* drawn again at a new width (a phone turned, a window resized) */
    if (typeof ResizeObserver !== "undefined") {
      var lastW = root.clientWidth, pending = false;
      new ResizeObserver(function () {
        if (pending) return;
        pending = true;
        requestAnimationFrame(function () {
          pending = false;
          if (Math.abs(root.clientWidth - lastW) > 8) { lastW = root.clientWidth; build(); }
        });
      }).observe(root);
    }
  }

  /* Initialise this output's explorer and any copy of it not yet drawn (the same output can appear
     several times on one page; hosts differ in whether document.currentScript is set). */
  var me = document.currentScript, uid = null;
  if (me && me.parentNode && me.parentNode.getAttribute) uid = me.parentNode.getAttribute("data-attnlib-uid");
  var sel = "div.attnlib-explorer:not([data-attnlib-ready]):not(.attnlib-live):not(.attnlib-kit)" + (uid ? '[data-attnlib-uid="' + uid + '"]' : "");
  var roots = Array.prototype.slice.call(document.querySelectorAll(sel));
  if (uid && !me.parentNode.hasAttribute("data-attnlib-ready") && roots.indexOf(me.parentNode) < 0) roots.push(me.parentNode);
  for (var r = 0; r < roots.length; r++) {
    try { init(roots[r]); } catch (err) { if (window.console) console.error("attnlib explorer:", err); }
  }
})();

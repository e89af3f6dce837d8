/* attnlib's drawing kit for the computing explorers (vectors, mask, heads grid, exercises, the live
   model's laboratory): DOM helpers, the palette, number formatting, a tooltip placed off the
   controls, width-fitted heatmaps whose text keeps its size, and the start-up of every output.
   Defines window.attnlibKit once; every output carries this file (defining it twice is harmless).
   Every string from a payload or from the reader reaches the page through textContent /
   setAttribute (escaped). */
window.attnlibKit = window.attnlibKit || (function () {
  "use strict";
  /* the SVG namespace, read from the HTML parser so that the output holds no URL at all */
  var SVGNS = (function () { var t = document.createElement("div"); t.innerHTML = "<svg></svg>"; return t.firstChild.namespaceURI; })();
  var CHAR_W = 7; /* approximate width of one 12 px character */

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
  function button(cls, parent, text, label, onclick) {
    var b = div(cls, parent, text, "button");
    b.type = "button";
    if (label) b.setAttribute("aria-label", label);
    if (onclick) b.addEventListener("click", onclick);
    return b;
  }
  function toggle(b, on) { b.setAttribute("aria-pressed", on ? "true" : "false"); }
  function shown(tok, width) {
    var s = String(tok).replace(/\n/g, "\u23ce").replace(/\t/g, "\u21e5");
    if (!s.trim()) s = s.replace(/ /g, "\u2423") || "\u2205";
    return width && s.length > width ? s.slice(0, width - 1) + "\u2026" : s;
  }
  function quoted(tok) { return "\u201c" + shown(tok) + "\u201d"; }
  /* x with d decimals; -0 shown as 0; -Infinity as -inf */
  function fmt(x, d) {
    if (x === -Infinity) return "-\u221e";
    if (x === Infinity) return "+\u221e";
    if (x !== x) return "NaN";
    var s = x.toFixed(d);
    return /^-0\.?0*$/.test(s) ? s.slice(1) : s;
  }
  function palette(hex) { var p = []; for (var i = 0; i < 256; i++) p.push("#" + hex.substr(6 * i, 6)); return p; }
  function colour(pal, v, lo, hi) {
    var t = (v - lo) / ((hi - lo) || 1);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return pal[Math.min(255, Math.floor(t * 256))];
  }
  function isDark(hex) {
    var r = parseInt(hex.substr(1, 2), 16), g = parseInt(hex.substr(3, 2), 16), b = parseInt(hex.substr(5, 2), 16);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 128;
  }
  function uid(root) {
    window.__attnlibExplorerCount = (window.__attnlibExplorerCount || 0) + 1;
    return (root.getAttribute("data-attnlib-uid") || "x") + "-" + window.__attnlibExplorerCount;
  }
  /* the width an output may draw in (its own box, else its parent's), at least 240 px */
  function width(root) { return Math.max(240, Math.floor(root.clientWidth || (root.parentNode && root.parentNode.clientWidth) || 640)); }
  /* call fn() when the output's width changes by more than a few pixels (a phone turned, a window resized) */
  function onResize(root, fn) {
    if (typeof ResizeObserver === "undefined") return;
    var last = width(root), pending = false;
    new ResizeObserver(function () {
      if (pending) return;
      pending = true;
      requestAnimationFrame(function () {
        pending = false;
        var w = width(root);
        if (Math.abs(w - last) > 8) { last = w; fn(); }
      });
    }).observe(root);
  }

  /* A tooltip placed beside its target but never above `floor` (the top of the drawing it belongs
     to, relative to root), so it never covers the title or the controls above the drawing. */
  function tip(root) {
    var t = div("attnlib-tooltip", root);
    t.setAttribute("role", "status");
    t.show = function (target, lines, floorEl) {
      t.textContent = "";
      div("attnlib-tip-tokens", t, lines[0]);
      var line = div("attnlib-tip-value", t, "");
      div("attnlib-value", line, lines[1], "b");
      for (var i = 2; i < lines.length; i++) if (lines[i]) div("attnlib-tip-where", t, lines[i]);
      t.style.display = "block";
      var rb = root.getBoundingClientRect(), cb = target.getBoundingClientRect();
      var floor = floorEl ? floorEl.getBoundingClientRect().top - rb.top : 0;
      var x = cb.right - rb.left + 8, y = cb.top - rb.top - t.offsetHeight - 6;
      if (x + t.offsetWidth > root.clientWidth) x = Math.max(0, cb.left - rb.left - t.offsetWidth - 8);
      if (x + t.offsetWidth > root.clientWidth) x = Math.max(0, root.clientWidth - t.offsetWidth);
      if (y < floor) y = cb.bottom - rb.top + 6;
      t.style.left = x + "px";
      t.style.top = y + "px";
    };
    t.hide = function () { t.style.display = "none"; };
    return t;
  }

  /* A hatch pattern for masked cells (colours from the stylesheet, so they follow a dark theme). */
  function hatch(svg, id) {
    var pat = el("pattern", { id: id, width: "6", height: "6", patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" },
      el("defs", {}, svg));
    el("rect", { "class": "attnlib-hatch-bg", width: "6", height: "6" }, pat);
    el("line", { "class": "attnlib-hatch-fg", x1: "0", y1: "0", x2: "0", y2: "6", "stroke-width": "2.5" }, pat);
    return "url(#" + id + ")";
  }

  /* A heatmap drawn to fit `avail` pixels: cells of cellMin..cellMax px, 12 px labels (never
     scaled down with the drawing), rows = queries, columns = keys.
     o: {parent, avail, rows, cols (labels), value(i, j) -> number, masked(i, j) -> bool (hatched), palette, lo, hi,
         digits, label (accessible name), cellMax, cellMin, rowTitle, colTitle, hatchId,
         cellText: true to print values when cells are large, onCell(i, j) (click / Enter),
         onHover(i, j, rect) / onLeave(), selected: row index or -1, dead(i) -> bool (a row with
         nothing to attend to), colLabelAngle}
     Returns {svg, cells (row-major), cell: size}. */
  function heatmap(o) {
    var R = o.rows.length, C = o.cols.length, i, j;
    var maxRow = 0, maxCol = 0;
    var LC = o.labelChars || 12;
    o.rows.forEach(function (t) { maxRow = Math.max(maxRow, shown(t, LC).length); });
    o.cols.forEach(function (t) { maxCol = Math.max(maxCol, shown(t, 12).length); });
    var rowW = 10 + CHAR_W * maxRow;
    var left = rowW + (o.rowTitle ? 18 : 6);
    var cell = Math.floor((o.avail - left - 8) / C);
    cell = Math.max(o.cellMin || 6, Math.min(o.cellMax || 34, cell));
    /* column labels upright when they fit their cell, else at 45 degrees */
    var every = o.colEvery || 1, rotate = o.colLabelAngle === 45 || CHAR_W * maxCol > cell * every - 2;
    var colH = rotate ? Math.ceil(0.72 * (CHAR_W * maxCol + 8)) : 16;
    var ch = Math.max(cell, o.cellH || 0); /* a cell's height: square, or taller for thin strips */
    var top = 4, W = left + C * cell + 8, H = top + R * ch + colH + (o.colTitle ? 20 : 6);
    var svg = el("svg", { "class": "attnlib-plot", width: W, height: H, viewBox: "0 0 " + W + " " + H, tabindex: "0",
      role: "group", focusable: "true", "aria-label": o.label }, o.parent);
    var fillMasked = hatch(svg, o.hatchId);
    var grid = el("g", {}, svg), cells = [], gap = cell >= 14 ? 1 : 0, step = Math.max(1, Math.ceil(13 / cell));
    var colStep = o.colEvery || step;
    for (i = 0; i < R; i++) {
      for (j = 0; j < C; j++) {
        var v = o.value(i, j), masked = !!(o.masked && o.masked(i, j));
        var fill = masked ? fillMasked : colour(o.palette, v, o.lo, o.hi);
        var c = el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * ch, width: cell - gap, height: ch - gap,
          fill: fill, "data-row": i, "data-col": j, "data-value": fmt(v, o.digits) }, grid);
        if (masked) c.setAttribute("data-masked", "1");
        cells.push(c);
        if (o.cellLabel) {
          el("text", { "class": "attnlib-celltext attnlib-celllabel", x: left + j * cell + (cell - gap) / 2, y: top + i * ch + (ch - gap) / 2 + 4,
            "text-anchor": "middle", style: "fill:" + (!masked && isDark(fill) ? "#fff" : "#000") }, grid, o.cellLabel(i, j));
        } else if (o.cellText && cell >= 30) {
          el("text", { "class": "attnlib-celltext", x: left + j * cell + (cell - gap) / 2, y: top + i * ch + (ch - gap) / 2 + 3.5,
            "text-anchor": "middle", style: "fill:" + (!masked && isDark(fill) ? "#fff" : "#000") }, grid, fmt(v, 2));
        }
      }
    }
    var rowLabels = [];
    for (i = 0; i < R; i++) {
      var t = el("text", { "class": (o.rowLabelClass || "attnlib-rowlabel") + (i === o.selected ? " attnlib-selected" : "") + (o.dead && o.dead(i) ? " attnlib-dead" : ""),
        x: left - 5, y: top + i * ch + ch / 2 + 4, "text-anchor": "end", tabindex: "-1", "data-row": i }, svg, shown(o.rows[i], LC));
      el("title", {}, t, (o.rowWord || "query") + " " + i + ": " + quoted(o.rows[i]));
      if (i % step) t.setAttribute("visibility", "hidden");
      rowLabels.push(t);
    }
    for (j = 0; j < C; j += colStep) {
      var x = left + j * cell + cell / 2, y = top + R * ch + (rotate ? 8 : 13);
      var ct = el("text", { "class": "attnlib-collabel", x: rotate ? x + 4 : x, y: y, "text-anchor": rotate ? "end" : "middle" }, svg, shown(o.cols[j], 12));
      if (rotate) ct.setAttribute("transform", "rotate(-45 " + (x + 4) + " " + y + ")");
      el("title", {}, ct, (o.colWord || "key") + " " + j + ": " + quoted(o.cols[j]));
    }
    if (o.colTitle) el("text", { "class": "attnlib-axis", x: left + C * cell / 2, y: H - 3, "text-anchor": "middle" }, svg, o.colTitle);
    if (o.rowTitle) {
      var qy = top + R * ch / 2;
      el("text", { "class": "attnlib-axis", x: 10, y: qy, "text-anchor": "middle", transform: "rotate(-90 10 " + qy + ")" }, svg, o.rowTitle);
    }
    if (o.selected >= 0 && o.selected < R) {
      el("rect", { "class": "attnlib-rowbox", x: left - 1.5, y: top + o.selected * ch - 1.5, width: C * cell + 2 - gap, height: ch + 2 - gap,
        fill: "none", "stroke-width": "3", "pointer-events": "none" }, svg);
    }
    if (o.framed) { /* cells to frame (e.g. every cell holding one token) */
      for (i = 0; i < R; i++) for (j = 0; j < C; j++) if (o.framed(i, j)) {
        el("rect", { "class": "attnlib-rowbox", x: left + j * cell - 1.5, y: top + i * ch - 1.5, width: cell + 2 - gap, height: ch + 2 - gap,
          fill: "none", "stroke-width": "3", "pointer-events": "none" }, svg);
      }
    }
    if (o.selectedCol >= 0 && o.selectedCol < C) {
      el("rect", { "class": "attnlib-rowbox", x: left + o.selectedCol * cell - 1.5, y: top - 1.5, width: cell + 2 - gap, height: R * ch + 2 - gap,
        fill: "none", "stroke-width": "3", "pointer-events": "none" }, svg);
    }
    var cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: ch - gap, fill: "none", "stroke-width": "2",
      "stroke-dasharray": "3 2", visibility: "hidden", "pointer-events": "none" }, svg);
    var sel0 = o.selected >= 0 ? o.selected : 0, cur = o.cursor || [sel0, 0];
    cur[0] = Math.min(cur[0], R - 1); cur[1] = Math.min(cur[1], C - 1);
    function move(a, b) {
      cur[0] = Math.max(0, Math.min(R - 1, a)); cur[1] = Math.max(0, Math.min(C - 1, b));
      var cl = cells[cur[0] * C + cur[1]];
      cursor.setAttribute("x", cl.getAttribute("x")); cursor.setAttribute("y", cl.getAttribute("y"));
      cursor.setAttribute("visibility", "visible");
      if (o.onHover) o.onHover(cur[0], cur[1], cl);
    }
    svg.addEventListener("mouseover", function (e) {
      var t = e.target;
      if (t.classList && t.classList.contains("attnlib-cell") && o.onHover) o.onHover(+t.getAttribute("data-row"), +t.getAttribute("data-col"), t);
    });
    svg.addEventListener("mouseleave", function () { if (o.onLeave) o.onLeave(); });
    svg.addEventListener("click", function (e) {
      var t = e.target, r = t.getAttribute && t.getAttribute("data-row");
      if (r === null || r === undefined) return;
      var c = t.getAttribute("data-col");
      if (c === null) { if (o.onRow) o.onRow(+r); }
      else if (o.onCell) o.onCell(+r, +c);
    });
    svg.addEventListener("focus", function () { move(cur[0], cur[1]); });
    svg.addEventListener("blur", function () { cursor.setAttribute("visibility", "hidden"); if (o.onLeave) o.onLeave(); });
    svg.addEventListener("keydown", function (e) {
      var k = e.key, a = cur[0], b = cur[1];
      if (k === "ArrowDown") move(a + 1, b);
      else if (k === "ArrowUp") move(a - 1, b);
      else if (k === "ArrowRight") move(a, b + 1);
      else if (k === "ArrowLeft") move(a, b - 1);
      else if (k === "Home") move(a, 0);
      else if (k === "End") move(a, C - 1);
      else if ((k === "Enter" || k === " ") && o.onCell) o.onCell(a, b);
      else if (k === "Escape" && o.onEscape) o.onEscape();
      else return;
      e.preventDefault();
    });
    return { svg: svg, cells: cells, cell: cell, cursor: cur, focusCell: move };
  }

  /* a colour bar: lo..hi, with a label; returns the svg */
  function colourbar(parent, pal, lo, hi, h, label, id) {
    var w = 12, x0 = 4, y0 = 6, s = el("svg", { "class": "attnlib-colorbar", width: 64, height: h + 12, "aria-hidden": "true" }, parent);
    var g = el("linearGradient", { id: id, x1: "0", y1: "1", x2: "0", y2: "0" }, el("defs", {}, s));
    for (var k = 0; k <= 32; k++) el("stop", { offset: (k / 32).toFixed(4), "stop-color": pal[Math.min(255, k * 8)] }, g);
    el("rect", { x: x0, y: y0, width: w, height: h, fill: "url(#" + id + ")", stroke: "#888", "stroke-width": "0.5" }, s);
    [lo, (lo + hi) / 2, hi].forEach(function (v, i) {
      var y = y0 + h - (h * i) / 2;
      el("line", { x1: x0 + w, x2: x0 + w + 4, y1: y, y2: y, stroke: "currentColor" }, s);
      el("text", { x: x0 + w + 6, y: y + 4 }, s, String(Number(v.toPrecision(3))));
    });
    var lx = x0 + w + 40, ly = y0 + h / 2;
    el("text", { "class": "attnlib-axis", x: lx, y: ly, "text-anchor": "middle", transform: "rotate(-90 " + lx + " " + ly + ")" }, s, label);
    return s;
  }

  /* Keys typed inside an output are its own (JupyterLab would act on them too); see heatmap_keys.js */
  function keepKeys(root) {
    root.addEventListener("keydown", function (e) {
      if (!(e.ctrlKey || e.metaKey || e.altKey || (e.shiftKey && e.key === "Enter"))) e.stopPropagation();
    });
  }

  /* Start every not yet drawn output of one kind: this script's own, and copies of it (the same
     output can appear several times on a page; hosts differ in whether currentScript is set). */
  function boot(me, cls, init, what) {
    var own = me && me.parentNode && me.parentNode.getAttribute ? me.parentNode.getAttribute("data-attnlib-uid") : null;
    var sel = "div." + cls + ":not([data-attnlib-ready])" + (own ? '[data-attnlib-uid="' + own + '"]' : "");
    var roots = Array.prototype.slice.call(document.querySelectorAll(sel));
    if (own && !me.parentNode.hasAttribute("data-attnlib-ready") && roots.indexOf(me.parentNode) < 0) roots.push(me.parentNode);
    roots.forEach(function (root) {
      root.setAttribute("data-attnlib-ready", "1");
      try {
        var ns = root.querySelector(".attnlib-noscript");
        if (ns) ns.parentNode.removeChild(ns);
        init(root, JSON.parse(root.querySelector("script.attnlib-payload, script.attnlib-data").textContent));
      } catch (err) { if (window.console) console.error("attnlib " + what + ":", err); }
    });
  }

  return { el: el, div: div, button: button, toggle: toggle, shown: shown, quoted: quoted, fmt: fmt, palette: palette,
    colour: colour, isDark: isDark, uid: uid, width: width, onResize: onResize, tip: tip, hatch: hatch,
    heatmap: heatmap, colourbar: colourbar, keepKeys: keepKeys, boot: boot, CHAR_W: CHAR_W };
})();

/* attnlib's DOM kit, shared by every output (the explorer, the live model and its laboratory, the
   vector and mask explorers, the heads grid, the exercises): element helpers, labelled controls
   (sliders, drop-downs, number boxes that refuse what the page cannot compute), the palette,
   number formatting, the packed numbers of a payload, a tooltip placed off the controls,
   width-fitted heatmaps whose text keeps its size, and the start-up of every output.
   Defines window.attnlibKit once; every output carries this file (defining it twice is harmless).
   A page can also hold outputs of an older attnlib (a notebook's stored outputs beside a cell run
   again in JupyterLab): a kit older than this version is replaced, as this one keeps every
   function the older ones had; outputs already drawn keep the kit they started with.
   Every string from a payload or from the reader reaches the page through textContent /
   setAttribute (escaped). */
window.attnlibKit = window.attnlibKit && window.attnlibKit.version >= 5 ?
  window.attnlibKit : (function () {
  "use strict";
  /* the SVG namespace, read from the HTML parser so that the output holds no URL at all */
  var SVGNS = (function () { var t = document.createElement("div"); t.innerHTML = "<svg></svg>";
    return t.firstChild.namespaceURI; })();
  var CHAR_W = 7; /* approximate width of one 12 px character */
  var AXIS_CHAR_W = 6.2; /* ... and of one 11 px axis title's (.attnlib-axis) */
  /* Label every this many columns of `cell` px when the labels are slanted: at 45 degrees they
     lie sin 45 = 0.71 of their spacing apart, and 19 px keeps 12 px text apart. */
  function slantedEvery(cell) { return Math.max(1, Math.ceil(19 / cell)); }

  function el(tag, attrs, parent, text) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs,
      k)) node.setAttribute(k, attrs[k]); }
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
  /* a button's text on a plate of one colour: readable (and measurable) over a hatched button */
  function plate(b, text) { b.textContent = ""; div("attnlib-plate", b, text, "span"); return b; }

  /* ---- labelled controls: <label class="attnlib-control"><span>name</span>
     control </label> ---- */
  function control(parent, name) {
    var lab = div("attnlib-control", parent, undefined, "label");
    div("", lab, name, "span");
    return lab;
  }
  /* a drop-down of names (an output's examples); onpick(index) */
  function picker(parent, name, names, onpick) {
    var s = div("", control(parent, name), undefined, "select");
    names.forEach(function (n, j) { div("", s, n, "option").value = String(j); });
    s.addEventListener("change", function () { onpick(+s.value); });
    return s;
  }
  /* A slider over whole numbers with a read-out beside it. o: {label (accessible name, default
     name), min (default 0), max, value, text(v) -> the read-out, valueText(v) -> aria-valuetext
     (default name + read-out), oninput(v)}. Returns the input; r.show(v) moves it and its read-out
     without an input event (a redraw from elsewhere), r.readout is the read-out. */
  function slider(parent, name, o) {
    var lab = control(parent, name), r = div("", lab, undefined, "input"),
      out = div("", lab, "", "output");
    r.type = "range"; r.step = "1"; r.min = String(o.min || 0);
    r.max = String(o.max === undefined ? 0 : o.max);
    r.setAttribute("aria-label", o.label || name);
    r.show = function (v) {
      r.value = String(v);
      if (!o.text) return;
      out.textContent = o.text(v);
      r.setAttribute("aria-valuetext", o.valueText ? o.valueText(v) : name + " " + out.textContent);
    };
    r.addEventListener("input", function () { r.show(+r.value);
      if (o.oninput) o.oninput(+r.value); });
    r.readout = out;
    r.show(o.value === undefined ? +r.min : o.value);
    return r;
  }
  /* A number box that hands on only what the page can compute: a number in [min, max] (a whole one
     with o.whole). Anything else is refused visibly: the box is marked invalid (aria-invalid, the
     browser's own validity, a message naming the allowed range, linked by aria-describedby) and
     nothing changes; leaving the box brings back the last number it handed on. An empty box (the
     reader is about to type; a test's clear()) is waited for, not refused; with o.refill, leaving
     it empty brings the number back too.
     o: {label (accessible name), value, min, max, step, whole, refill, title, cls, note (the
     element the message goes in; default a span after the box), text(x) -> the box's text for x,
     onvalue(x), done() (the reader left the box after a good number: e.g. refit a drawing's
     range)}. Returns the input; box.get() is its last good number, box.set(x) shows x (not while
     the reader is typing in it). */
  var boxes = 0;
  function numberBox(parent, o) {
    var box = div(o.cls || "", parent, undefined, "input"), good = o.value, note = o.note;
    var text = o.text || String, lo = o.min === undefined ? -Infinity : o.min,
      hi = o.max === undefined ? Infinity : o.max;
    box.type = "number"; box.step = String(o.step || "any"); box.value = text(good);
    if (isFinite(lo)) box.min = String(lo);
    if (isFinite(hi)) box.max = String(hi);
    if (o.title) box.title = o.title;
    box.setAttribute("aria-label", o.label);
    if (!note) { note = div("attnlib-invalid-note", parent, "", "span");
      note.style.display = "none"; }
    if (!note.id) note.id = "attnlib-note-" + (++boxes);
    var range = (o.whole ? "a whole number" : "a number") + " from " +
      fmtLimit(lo) + " to " + fmtLimit(hi);
    function mark(why) {
      box.setCustomValidity(why);
      if (why) {
        box.setAttribute("aria-invalid", "true");
        box.setAttribute("aria-describedby", note.id);
        note.textContent = why;
        note.style.display = "";
        note._by = box;
      } else {
        box.removeAttribute("aria-invalid");
        if (note._by === box) { note.textContent = "";
          note.style.display = "none"; note._by = null; }
      }
    }
    box.addEventListener("input", function () {
      var raw = box.value, x = parseFloat(raw);
      if (raw === "" && !box.validity.badInput) { mark(""); return; }
      if (!isFinite(x) || x < lo || x > hi || (o.whole && x !== Math.floor(x))) {
        mark(o.label + ": " + (box.validity.badInput || !isFinite(x) ?
          "not a number I can compute with" : raw + " is out of range") + "; type " + range + ".");
        return;
      }
      mark("");
      good = x;
      o.onvalue(x);
    });
    box.addEventListener("change", function () {
      if (box.getAttribute("aria-invalid") === "true" || (o.refill && box.value === "")) {
        box.value = text(good); mark(""); }
      else if (o.done) o.done();
    });
    box.get = function () { return good; };
    box.set = function (x) { good = x; if (box !== document.activeElement) {
      box.value = text(x); mark(""); } };
    return box;
  }
  function fmtLimit(x) { return x < 0 ? "\u2212" + String(-x) : String(x); }

  /* The packed numbers of an explorer payload: value * 10^digits as little-endian unsigned integers
     of ex.bytes bytes, offset by ex.base; the three largest integers stand for -inf, +inf and NaN.
     -> {code: the integer value * 10^digits (exact; the sentinel's own value for one), kind: 0, or
     -1 / 1 / 2 for -inf / +inf / NaN} */
  function unpack(ex) {
    var bin = atob(ex.data), nb = ex.bytes, n = bin.length / nb;
    var top = Math.pow(2, 8 * nb) - 1, code = new Float64Array(n), kind = new Int8Array(n);
    for (var i = 0; i < n; i++) {
      var u = 0;
      for (var b = nb - 1; b >= 0; b--) u = u * 256 + bin.charCodeAt(i * nb + b);
      if (u === top) { kind[i] = -1; code[i] = -Infinity; }
      else if (u === top - 1) { kind[i] = 1; code[i] = Infinity; }
      else if (u === top - 2) { kind[i] = 2; code[i] = NaN; }
      else code[i] = u + ex.base;
    }
    return { code: code, kind: kind };
  }
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
  function palette(hex) { var p = []; for (var i = 0; i < 256;
    i++) p.push("#" + hex.substr(6 * i, 6)); return p; }
  function colour(pal, v, lo, hi) {
    var t = (v - lo) / ((hi - lo) || 1);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return pal[Math.min(255, Math.floor(t * 256))];
  }
  /* true where white text reads better than black on this fill: WCAG's relative luminance (linear
     light) below 0.179, where the two contrasts cross; the better of the two is then >= 4.5:1 */
  function isDark(hex) {
    var lin = function (k) {
      var c = parseInt(hex.substr(k, 2), 16) / 255;
      return c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * lin(1) + 0.7152 * lin(3) + 0.0722 * lin(5) < 0.179;
  }
  function uid(root) {
    window.__attnlibExplorerCount = (window.__attnlibExplorerCount || 0) + 1;
    return (root.getAttribute("data-attnlib-uid") || "x") + "-" + window.__attnlibExplorerCount;
  }
  /* the width an output may draw in (its own box, else its parent's), at least 240 px */
  function width(root) { return Math.max(240, Math.floor(root.clientWidth || (root.parentNode &&
    root.parentNode.clientWidth) || 640)); }
  /* call fn() when the output's width changes by more than a few pixels (a phone
     turned, a window resized) */
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

  /* A tooltip placed beside its target but never above floorEl (the drawing it belongs to), so it
     never covers the title or the controls above the drawing. t.show(target, lines, floorEl, cell):
     lines = [what, value (a string, or [name, value]: only the value in bold), where...]; t.cell
     is the cell it reads (-1 when hidden or reading something else), for a redraw to show again. */
  function tip(root) {
    var t = div("attnlib-tooltip", root);
    t.setAttribute("role", "status");
    t.cell = -1;
    t.show = function (target, lines, floorEl, cell) {
      t.cell = cell === undefined ? -1 : cell;
      t.textContent = "";
      div("attnlib-tip-tokens", t, lines[0]);
      var v = lines[1], line = div("attnlib-tip-value", t, typeof v === "string" ? "" : v[0]);
      div("attnlib-value", line, typeof v === "string" ? v : v[1], "b");
      for (var i = 2; i < lines.length; i++) if (lines[i]) div("attnlib-tip-where", t, lines[i]);
      t.style.display = "block";
      var rb = root.getBoundingClientRect(), cb = target.getBoundingClientRect();
      var floor = floorEl ? floorEl.getBoundingClientRect().top - rb.top : 0;
      var x = cb.right - rb.left + 8, y = cb.top - rb.top - t.offsetHeight - 6;
      if (x + t.offsetWidth > root.clientWidth) x = Math.max(0,
        cb.left - rb.left - t.offsetWidth - 8);
      if (x + t.offsetWidth > root.clientWidth) x = Math.max(0, root.clientWidth - t.offsetWidth);
      if (y < floor) y = cb.bottom - rb.top + 6;
      t.style.left = x + "px";
      t.style.top = y + "px";
    };
    t.hide = function () { t.style.display = "none"; t.cell = -1; };
    return t;
  }

  /* The explorer's layout under its controls (the attention explorer, the live model): a "clear
     row" button among the controls, the drawing beside the bars of the highlighted row, a tooltip
     */
  function matrixFrame(root, controls, clearRow) {
    var clear = button("attnlib-clear", controls, "clear row", null, clearRow),
      body = div("attnlib-body", root);
    clear.title = "Clear the highlighted query row (Esc)";
    return { clear: clear, figure: div("attnlib-figure", body), bars: div("attnlib-bars",
      body), tip: tip(root) };
  }

  /* A hatch pattern for masked cells (colours from the stylesheet, so they follow a dark theme). */
  function hatch(svg, id) {
    var pat = el("pattern", { id: id, width: "6", height: "6", patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)" }, el("defs", {}, svg));
    el("rect", { "class": "attnlib-hatch-bg", width: "6", height: "6" }, pat);
    el("line", { "class": "attnlib-hatch-fg", x1: "0", y1: "0", x2: "0", y2: "6",
      "stroke-width": "2.5" }, pat);
    return "url(#" + id + ")";
  }

  /* A heatmap drawn to fit `avail` pixels: cells of cellMin..cellMax px, 12 px labels (never
     scaled down with the drawing), rows = queries, columns = keys.
     o: {parent, avail, rows, cols (labels), value(i, j) -> number, masked(i, j) -> bool
     (hatched), palette, lo, hi,
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
    var every = o.colEvery || 1, rotate = o.colLabelAngle === 45 ||
      CHAR_W * maxCol > cell * every - 2;
    var colH = rotate ? Math.ceil(0.72 * (CHAR_W * maxCol + 8)) : 16;
    var ch = Math.max(cell, o.cellH || 0); /* a cell's height: square, or taller for thin strips */
    var top = 4, W = left + C * cell + 8, H = top + R * ch + colH + (o.colTitle ? 20 : 6);
    /* the column title is centred under the columns, but never starts left of the drawing: a
       title wider than a few columns (one query's weights over two keys) widens the drawing */
    var titleW = o.colTitle ? AXIS_CHAR_W * o.colTitle.length : 0;
    var titleX = Math.max(left + C * cell / 2, titleW / 2 + 2);
    W = Math.max(W, Math.ceil(titleX + titleW / 2 + 4));
    var svg = el("svg", { "class": "attnlib-plot", width: W, height: H, viewBox: "0 0 " + W + " " +
      H, tabindex: "0", role: "group", focusable: "true", "aria-label": o.label }, o.parent);
    var fillMasked = hatch(svg, o.hatchId);
    var grid = el("g", {}, svg), cells = [], gap = cell >= 14 ? 1 : 0,
      step = Math.max(1, Math.ceil(13 / cell));
    var colStep = o.colEvery || (rotate ? slantedEvery(cell) : step);
    for (i = 0; i < R; i++) {
      for (j = 0; j < C; j++) {
        var v = o.value(i, j), masked = !!(o.masked && o.masked(i, j));
        var fill = masked ? fillMasked : colour(o.palette, v, o.lo, o.hi);
        var c = el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * ch,
          width: cell - gap, height: ch - gap, fill: fill, "data-row": i, "data-col": j,
          "data-value": fmt(v, o.digits) }, grid);
        if (masked) c.setAttribute("data-masked", "1");
        cells.push(c);
        if (o.cellLabel) {
          el("text", { "class": "attnlib-celltext attnlib-celllabel" + (masked ?
            " attnlib-onhatch" : ""), x: left + j * cell + (cell - gap) / 2,
            y: top + i * ch + (ch - gap) / 2 + 4, "text-anchor": "middle", style: masked ? "" :
            "fill:" + (isDark(fill) ? "#fff" : "#000") }, grid, o.cellLabel(i, j));
        } else if (o.cellText && cell >= 30) {
          el("text", { "class": "attnlib-celltext" + (masked ? " attnlib-onhatch" : ""),
            x: left + j * cell + (cell - gap) / 2, y: top + i * ch + (ch - gap) / 2 + 3.5,
            "text-anchor": "middle", style: masked ? "" : "fill:" + (isDark(fill) ? "#fff" :
              "#000") }, grid, fmt(v, 2));
        }
      }
    }
    var rowLabels = [];
    for (i = 0; i < R; i++) {
      var t = el("text", { "class": (o.rowLabelClass || "attnlib-rowlabel") + (i === o.selected ?
        " attnlib-selected" : "") + (o.dead && o.dead(i) ? " attnlib-dead" : ""),
        x: left - 5, y: top + i * ch + ch / 2 + 4, "text-anchor": "end", tabindex: "-1", "data-row":
          i }, svg, shown(o.rows[i], LC));
      el("title", {}, t, (o.rowWord || "query") + " " + i + ": " + quoted(o.rows[i]));
      if (i % step) t.setAttribute("visibility", "hidden");
      rowLabels.push(t);
    }
    for (j = 0; j < C; j += colStep) {
      var x = left + j * cell + cell / 2, y = top + R * ch + (rotate ? 8 : 13);
      var ct = el("text", { "class": "attnlib-collabel", x: rotate ? x + 4 : x, y: y, "text-anchor":
        rotate ? "end" : "middle" }, svg, shown(o.cols[j], 12));
      if (rotate) ct.setAttribute("transform", "rotate(-45 " + (x + 4) + " " + y + ")");
      el("title", {}, ct, (o.colWord || "key") + " " + j + ": " + quoted(o.cols[j]));
    }
    if (o.colTitle) el("text", { "class": "attnlib-axis", x: titleX, y: H - 3,
      "text-anchor": "middle" }, svg, o.colTitle);
    if (o.rowTitle) {
      var qy = top + R * ch / 2;
      el("text", { "class": "attnlib-axis", x: 10, y: qy, "text-anchor": "middle", transform:
        "rotate(-90 10 " + qy + ")" }, svg, o.rowTitle);
    }
    var rowBox = null;
    function boxRow(r) {
      rowBox = r >= 0 && r < R ? el("rect", { "class": "attnlib-rowbox", x: left - 1.5,
        y: top + r * ch - 1.5, width: C * cell + 2 - gap, height: ch + 2 - gap, fill: "none",
        "stroke-width": "3", "pointer-events": "none" }, svg) : null;
    }
    boxRow(o.selected);
    if (o.framed) { /* cells to frame (e.g. every cell holding one token) */
      for (i = 0; i < R; i++) for (j = 0; j < C; j++) if (o.framed(i, j)) {
        el("rect", { "class": "attnlib-rowbox", x: left + j * cell - 1.5, y: top + i * ch - 1.5,
          width: cell + 2 - gap, height: ch + 2 - gap, fill: "none", "stroke-width": "3",
          "pointer-events": "none" }, svg);
      }
    }
    if (o.selectedCol >= 0 && o.selectedCol < C) {
      el("rect", { "class": "attnlib-rowbox", x: left + o.selectedCol * cell - 1.5, y: top - 1.5,
        width: cell + 2 - gap, height: R * ch + 2 - gap, fill: "none", "stroke-width": "3",
        "pointer-events": "none" }, svg);
    }
    var cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: ch - gap,
      fill: "none", "stroke-width": "2", "stroke-dasharray": "3 2", visibility: "hidden",
      "pointer-events": "none" }, svg);
    var sel0 = o.selected >= 0 ? o.selected : 0, cur = o.cursor || [sel0, 0];
    cur[0] = Math.min(cur[0], R - 1); cur[1] = Math.min(cur[1], C - 1);
    function move(a, b) {
      cur[0] = Math.max(0, Math.min(R - 1, a)); cur[1] = Math.max(0, Math.min(C - 1, b));
      var cl = cells[cur[0] * C + cur[1]];
      cursor.setAttribute("x", cl.getAttribute("x"));
      cursor.setAttribute("y", cl.getAttribute("y"));
      cursor.setAttribute("visibility", "visible");
      if (o.onHover) o.onHover(cur[0], cur[1], cl);
    }
    svg.addEventListener("mouseover", function (e) {
      var t = e.target;
      if (t.classList && t.classList.contains("attnlib-cell") && o.onHover) o.onHover(+
        t.getAttribute("data-row"), +t.getAttribute("data-col"), t);
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
    svg.addEventListener("blur", function () { cursor.setAttribute("visibility", "hidden");
      if (o.onLeave) o.onLeave(); });
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
    /* another selected row, drawn in place (its label and its box; nothing else is rebuilt) */
    function select(r) {
      rowLabels.forEach(function (t, i) { t.classList.toggle("attnlib-selected", i === r); });
      if (rowBox) svg.removeChild(rowBox);
      boxRow(r);
      if (rowBox) svg.insertBefore(rowBox, cursor);
    }
    return { svg: svg, cells: cells, cell: cell, cursor: cur, focusCell: move, select: select };
  }

  /* A colour bar: lo..hi, with a label (placed clear of the widest tick); masked: the fill of
     masked cells, for a key under the bar (class attnlib-masked-key, to show or hide). */
  function colourbar(parent, pal, lo, hi, h, label, id, masked) {
    var ticks = [lo, (lo + hi) / 2, hi].map(function (v) {
      return String(Number(v.toPrecision(3))); });
    var w = 12, x0 = 4, y0 = 6, longest = Math.max.apply(null,
      ticks.map(function (t) { return t.length; }));
    var lx = x0 + w + 6 + Math.max(34, CHAR_W * longest + 4), ly = y0 + h / 2;
    /* the key's word ("masked", 12 px) is wider than the bar and its ticks */
    var W = masked ? Math.max(lx + 8, x0 + w + 6 + CHAR_W * 7 + 2) : lx + 8;
    var s = el("svg", { "class": "attnlib-colorbar", width: W, height: h + (masked ? 40 : 12),
      "aria-hidden": "true" }, parent);
    var g = el("linearGradient", { id: id, x1: "0", y1: "1", x2: "0", y2: "0" }, el("defs", {}, s));
    for (var k = 0; k <= 32; k++) el("stop", { offset: (k / 32).toFixed(4), "stop-color":
      pal[Math.min(255, k * 8)] }, g);
    el("rect", { x: x0, y: y0, width: w, height: h, fill: "url(#" + id + ")", stroke: "#888",
      "stroke-width": "0.5" }, s);
    ticks.forEach(function (t, i) {
      var y = y0 + h - (h * i) / 2;
      el("line", { x1: x0 + w, x2: x0 + w + 4, y1: y, y2: y, stroke: "currentColor" }, s);
      el("text", { x: x0 + w + 6, y: y + 4 }, s, t);
    });
    el("text", { "class": "attnlib-axis", x: lx, y: ly, "text-anchor": "middle", transform:
      "rotate(-90 " + lx + " " + ly + ")" }, s, label);
    if (masked) {
      var key = el("g", { "class": "attnlib-masked-key" }, s);
      el("rect", { x: x0, y: y0 + h + 14, width: w, height: w, fill: masked, stroke: "#888",
        "stroke-width": "0.5" }, key);
      el("text", { x: x0 + w + 6, y: y0 + h + 24 }, key, "masked");
    }
    return s;
  }

  /* Keys typed inside an output are its own: JupyterLab listens on document (bubbling) and would
     otherwise also act on them (arrows move between cells, Enter edits, "a"/"b"/"d d" edit cells).
     onEscape(target): Escape outside a drawing (an svg handles its own) clears, e.g. a selected
     row. */
  function keepKeys(root, onEscape) {
    root.addEventListener("keydown", function (e) {
      if (onEscape && e.key === "Escape" && e.target.tagName !== "svg") onEscape(e.target);
      if (!(e.ctrlKey || e.metaKey || e.altKey || (e.shiftKey &&
        e.key === "Enter"))) e.stopPropagation();
    });
  }

  /* Start every not yet drawn output of one kind: this script's own, and copies of it (the same
     output can appear several times on a page; hosts differ in whether currentScript is set). */
  function boot(me, cls, init, what) {
    var own = me && me.parentNode && me.parentNode.getAttribute ?
      me.parentNode.getAttribute("data-attnlib-uid") : null;
    var sel = "div." + cls + ":not([data-attnlib-ready])" + (own ?
      '[data-attnlib-uid="' + own + '"]' : "");
    var roots = Array.prototype.slice.call(document.querySelectorAll(sel));
    if (own && !me.parentNode.hasAttribute("data-attnlib-ready") && roots.indexOf(me.parentNode) <
      0) roots.push(me.parentNode);
    roots.forEach(function (root) {
      root.setAttribute("data-attnlib-ready", "1");
      try {
        var ns = root.querySelector(".attnlib-noscript");
        if (ns) ns.parentNode.removeChild(ns);
        init(root, JSON.parse(root.querySelector("script.attnlib-payload, script.attnlib-data, " +
          "script.attnlib-live-data").textContent));
      } catch (err) { if (window.console) console.error("attnlib " + what + ":", err); }
    });
  }

  return { version: 5, el: el, div: div, button: button, toggle: toggle, plate: plate,
    control: control, picker: picker, slider: slider, numberBox: numberBox, unpack: unpack,
    shown: shown, quoted: quoted, fmt: fmt, palette: palette, colour: colour, isDark: isDark,
    uid: uid, width: width, onResize: onResize, tip: tip, matrixFrame: matrixFrame, hatch: hatch,
      heatmap: heatmap, colourbar: colourbar, keepKeys: keepKeys,
    boot: boot, CHAR_W: CHAR_W, AXIS_CHAR_W: AXIS_CHAR_W, slantedEvery: slantedEvery };
})();

/* attnlib attention explorer: draws precomputed states as SVG with the shared DOM kit
   (window.attnlibKit, kit.js) and the heatmap's mouse and keyboard (heatmap_keys.js), both carried
   before this file. No globals of its own, no network, no eval. Every string from the payload
   reaches the page through textContent / setAttribute (escaped). */
(function () {
  "use strict";
  /* taken now: a later output on the page (another attnlib's) may define the globals again */
  var K = window.attnlibKit, wireHeatmap = window.attnlibWireHeatmap;
  var el = K.el, div = K.div, shown = K.shown, quoted = K.quoted;

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

  function init(root, P) {
    /* ids of runtime-made <pattern>/<linearGradient> must differ between copies of one output */
    var uid = K.uid(root), palette = K.palette(P.palette);
    var scale = Math.pow(10, P.digits), span = P.vmax - P.vmin;
    /* what rows and columns are: queries and keys, unless the payload names them */
    var rowName = P.axes ? P.axes[0] : "query", colName = P.axes ? P.axes[1] : "key";
    function colourOf(v) { return K.colour(palette, v, P.vmin, P.vmax); }
    var decoded = [];
    function values(e) { if (!decoded[e]) decoded[e] = K.unpack(P.examples[e]); return decoded[e]; }

    var state = { ex: 0, idx: P.dims.map(function () { return 0; }), row: -1, cur: [0, 0] };

    /* ---- static frame: title, controls, figure, bars, tooltip ---- */
    if (P.title) div("attnlib-title", root, P.title);
    var controls = div("attnlib-controls", root);
    var select = null;
    if (P.examples.length > 1) {
      select = K.picker(controls, "example", P.examples.map(function (ex) {
        return ex.name; }), function (e) {
        state.ex = e; state.row = -1; state.cur = [0, 0]; build();
      });
    }
    P.dims.forEach(function (d, j) {
      if (d.labels.length < 2) return;
      K.slider(controls, d.name, { max: d.labels.length - 1, text: function (i) {
        return String(d.labels[i]); }, oninput: function (i) { state.idx[j] = i; paint(); } });
    });
    var frame = K.matrixFrame(root, controls, function () { selectRow(-1); });
    var clear = frame.clear, figure = frame.figure, bars = frame.bars, tip = frame.tip;

    var svg = null, cbar = null, cells = [], cellText = [], rowLabels = [], rowBox = null,
      rowInner = null, cursor = null, geo = null;

    function build() {
      var ex = P.examples[state.ex], tq = ex.rows.length, tk = ex.cols.length;
      tip.hide(); /* its cell index belonged to the previous example's grid */
      figure.textContent = "";
      var maxRow = 0, maxCol = 0;
      ex.rows.forEach(function (t) { maxRow = Math.max(maxRow, shown(t, 14).length); });
      ex.cols.forEach(function (t) { maxCol = Math.max(maxCol, shown(t, 14).length); });
      var rowW = 10 + K.CHAR_W * maxRow, colH = Math.ceil(0.72 * (K.CHAR_W * maxCol + 8));
      /* cells fitted to the width the page gives (less the colour bar), so the drawing is never
         shrunk and its 12 px labels stay 12 px on a phone */
      var avail = Math.max(240, root.clientWidth || 640) - 78, fit = function (l) {
        return Math.floor((avail - l - 6) / tk); };
      var cell = Math.max(8, Math.min(34, Math.floor(440 / Math.max(tq, tk)), fit(rowW + 18)));
      var left = Math.max(rowW + 18, colH - cell / 2 + 4);
      cell = Math.max(8, Math.min(cell, fit(left)));
      left = Math.max(rowW + 18, colH - cell / 2 + 4);
      /* a row label per 13 px; the column labels are slanted */
      var rowStep = Math.max(1, Math.ceil(13 / cell)), colStep = K.slantedEvery(cell);
      var top = 4;
      var W = left + tk * cell + 6, H = top + tq * cell + colH + 20;
      geo = { cell: cell, left: left, top: top, tq: tq, tk: tk };
      svg = el("svg", { "class": "attnlib-plot", width: W, height: H, viewBox: "0 0 " + W + " " + H,
        tabindex: "0", role: "group", focusable: "true",
        "aria-label": (P.title ? P.title + ": " : "") + P.valueName + " matrix, " + (P.axes ?
          tq + " rows (" + rowName + ") by " + tk + " columns (" + colName + ")" : tq +
          " queries by " + tk + " keys") + ". Arrow keys move, Enter highlights the " +
          rowName + " row, Escape clears." }, figure);
      K.hatch(svg, "attnlib-hatch-" + uid);
      var grid = el("g", {}, svg);
      cells = []; cellText = []; rowLabels = [];
      var gap = cell >= 14 ? 1 : 0;
      for (var i = 0; i < tq; i++) {
        for (var j = 0; j < tk; j++) {
          var c = el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * cell,
            width: cell - gap, height: cell - gap, "data-row": i, "data-col": j }, grid);
          cells.push(c);
          if (cell >= 30) cellText.push(el("text", { "class": "attnlib-celltext",
            x: left + j * cell + (cell - gap) / 2, y: top + i * cell + (cell - gap) / 2 + 3.5,
            "text-anchor": "middle" }, grid, ""));
        }
      }
      for (i = 0; i < tq; i++) {
        var t = el("text", { "class": "attnlib-rowlabel", x: left - 5,
          y: top + i * cell + cell / 2 + 4,
          "text-anchor": "end", tabindex: "-1", role: "button", "data-row": i, /* the
             matrix is one tab stop */
          "aria-label": rowName + " " + i + ": " + ex.rows[i] }, svg, shown(ex.rows[i], 14));
        el("title", {}, t, rowName + " " + i + ": " + quoted(ex.rows[i]));
        if (i % rowStep) t.setAttribute("visibility", "hidden");
        rowLabels.push(t);
      }
      for (j = 0; j < tk; j += colStep) {
        var x = left + j * cell + cell / 2 + 4, y = top + tq * cell + 8;
        var ct = el("text", { "class": "attnlib-collabel", x: x, y: y, "text-anchor": "end",
          transform: "rotate(-45 " + x + " " + y + ")" }, svg, shown(ex.cols[j], 14));
        el("title", {}, ct, colName + " " + j + ": " + quoted(ex.cols[j]));
      }
      el("text", { "class": "attnlib-axis", x: left + tk * cell / 2, y: H - 2, "text-anchor":
        "middle" }, svg, colName);
      var qx = 10, qy = top + tq * cell / 2;
      el("text", { "class": "attnlib-axis", x: qx, y: qy, "text-anchor": "middle",
        transform: "rotate(-90 " + qx + " " + qy + ")" }, svg, rowName);
      /* the highlighted query row: a black frame with a white inner line, visible on any colour */
      rowBox = el("rect", { "class": "attnlib-rowbox", x: left - 1.5, width: tk * cell + 2 - gap,
        height: cell + 2 - gap, fill: "none", stroke: "#000", "stroke-width": "3", visibility:
        "hidden", "pointer-events": "none" }, svg);
      rowInner = el("rect", { "class": "attnlib-rowinner", x: left + 0.5, width: tk * cell - 2 -
        gap, height: cell - 2 - gap, fill: "none", stroke: "#fff", "stroke-width": "1", visibility:
        "hidden", "pointer-events": "none" }, svg);
      cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: cell - gap,
        fill: "none", stroke: "#e66100", "stroke-width": "2", "stroke-dasharray":
        "3 2", visibility: "hidden",
        "pointer-events": "none" }, svg);
      cbar = K.colourbar(figure, palette, P.vmin, P.vmax, Math.max(120, Math.min(260, tq * cell)),
        P.valueName, "attnlib-grad-" + uid, "url(#attnlib-hatch-" + uid + ")");
      wireHeatmap({ svg: svg, cells: cells, cursor: cursor, rowLabels: rowLabels, rows: tq,
        cols: tk, cur: function () { return state.cur; }, selectRow: selectRow,
        showTip: showTip, hideTip: tip.hide });
      paint();
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
      var V = values(state.ex), base = offset(), hasMasked = false,
        hatch = "url(#attnlib-hatch-" + uid + ")";
      for (var n = 0; n < cells.length; n++) {
        var kind = V.kind[base + n], code = V.code[base + n], fill;
        if (kind === -1 || kind === 2) { fill = hatch; hasMasked = true; }
        else fill = kind === 1 ? palette[255] : colourOf(code / scale);
        cells[n].setAttribute("fill", fill);
        cells[n].setAttribute("data-value", kind === 0 ? fmtCode(code, P.digits) : (kind === -1 ?
          "-inf" : kind === 1 ? "inf" : "nan"));
        if (cellText.length) {
          cellText[n].textContent = kind === 0 ? fmtCode(code,
            P.digits).replace(/^(-?\d+\.\d{2})\d*$/, "$1") : (kind === -1 ? "-\u221e" : "");
          /* style: CSS beats attributes; on the hatch, the theme's text on a halo
             of the hatch's ground */
          var onHatch = fill.charAt(0) !== "#";
          cellText[n].setAttribute("class", "attnlib-celltext" + (onHatch ?
            " attnlib-onhatch" : ""));
          cellText[n].style.fill = onHatch ? "" : K.isDark(fill) ? "#fff" : "#000";
        }
      }
      var mk = cbar.querySelector(".attnlib-masked-key");
      mk.setAttribute("visibility", hasMasked ? "visible" : "hidden");
      rowLabels.forEach(function (t, i) { t.setAttribute("class",
        "attnlib-rowlabel" + (i === state.row ? " attnlib-selected" : "")); });
      var vis = state.row >= 0 ? "visible" : "hidden";
      rowBox.setAttribute("y", geo.top + Math.max(0, state.row) * geo.cell - 1.5);
      rowInner.setAttribute("y", geo.top + Math.max(0, state.row) * geo.cell + 0.5);
      rowBox.setAttribute("visibility", vis);
      rowInner.setAttribute("visibility", vis);
      clear.disabled = state.row < 0;
      paintBars();
      if (tip.cell >= 0) showTip(tip.cell);
      root.setAttribute("data-state", stateString());
    }

    function paintBars() {
      var ex = P.examples[state.ex];
      bars.textContent = "";
      if (state.row < 0) { div("attnlib-hint", bars, "Click a " + rowName + (P.axes ? "" :
        " token") + " (row label) or a cell: its row shows here, " + P.valueName + " for each " +
        colName + "."); return; }
      div("attnlib-bars-head", bars, rowName + " " + quoted(ex.rows[state.row]) + " \u2192 " +
        P.valueName + " for each " + colName);
      var V = values(state.ex), base = offset() + state.row * geo.tk,
        m = Math.max(Math.abs(P.vmin), Math.abs(P.vmax));
      for (var j = 0; j < geo.tk; j++) {
        var kind = V.kind[base + j], code = V.code[base + j], v = code / scale;
        var row = div("attnlib-bar", bars);
        row.setAttribute("data-col", j);
        var tok = div("attnlib-bar-token", row, shown(ex.cols[j], 14));
        tok.title = colName + " " + j + ": " + quoted(ex.cols[j]);
        var track = div("attnlib-bar-track", row);
        if (kind === -1 || kind === 2) div("attnlib-bar-masked", track);
        else {
          var f = div("attnlib-bar-fill", track);
          /* bar length: |v| on a diverging scale (colour gives the sign), else
             position in [vmin, vmax] */
          var frac = kind === 1 ? 1 : Math.min(1, P.diverging ? Math.abs(v) /
            m : (v - P.vmin) / span);
          f.style.width = (100 * Math.max(0, frac)).toFixed(1) + "%";
          f.style.background = kind === 1 ? palette[255] : colourOf(v);
        }
        div("attnlib-bar-value", row, kind === 0 ? fmtCode(code, P.digits) : fmt(kind, code,
          P.digits).split(" ")[0]);
      }
    }

    function showTip(n) {
      var ex = P.examples[state.ex], i = Math.floor(n / geo.tk), j = n % geo.tk;
      var V = values(state.ex), kind = V.kind[offset() + n], code = V.code[offset() + n];
      var where = [];
      if (P.examples.length > 1) where.push(ex.name);
      P.dims.forEach(function (d, k) { if (d.labels.length > 1) where.push(d.name + " " +
        d.labels[state.idx[k]]); });
      tip.show(cells[n], [rowName + " " + quoted(ex.rows[i]) + " (" + i + ") \u2192 " + colName +
        " " + quoted(ex.cols[j]) + " (" + j + ")", [P.valueName + " = ", fmt(kind, code, P.digits)],
        where.join(" \u00b7 ")], figure, n);
    }
    function selectRow(i) { state.row = i; paint(); }

    K.keepKeys(root, function () { selectRow(-1); });
    build();
    K.onResize(root, build); /* drawn again at a new width (a phone turned, a window resized) */
  }

  /* this output's explorer and any copy of it not yet drawn; roots of the other outputs also carry
     the class attnlib-explorer */
  K.boot(document.currentScript,
    "attnlib-explorer:not(.attnlib-live):not(.attnlib-kit)", init, "explorer");
})();

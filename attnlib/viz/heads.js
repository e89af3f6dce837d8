/* attnlib heads grid: every layer x head as a thumbnail (bertviz's model view, no kernel). Click a
   thumbnail to enlarge it (again to close), hover for the weight, click a query to follow its row
   through every head. Numbers: the explorer's packed payload (value * 10^digits, offset). */
(function () {
  "use strict";
  var K = window.attnlibKit;

  function decode(ex, digits) { /* -> Float64Array of values (-Infinity / NaN for the sentinels) */
    var u = K.unpack(ex), out = new Float64Array(u.code.length), p = Math.pow(10, digits);
    for (var i = 0; i < out.length; i++) out[i] = u.kind[i] ? u.code[i] : u.code[i] / p;
    return out;
  }

  function init(root, P) {
    var uid = K.uid(root), pal = K.palette(P.palette), D = P.digits, L = P.dims[0].labels.length,
      H = P.dims[1].labels.length;
    var S = { ex: 0, open: P.start.slice(), row: -1, focus: P.start.slice() }, cache = [];
    function vals(e) { if (!cache[e]) cache[e] = decode(P.examples[e], D); return cache[e]; }
    function ex() { return P.examples[S.ex]; }
    function w(l, h, i, j) { var e = ex(), tq = e.rows.length, tk = e.cols.length;
      return vals(S.ex)[((l * H + h) * tq + i) * tk + j]; }
    function fmtv(v) { return v === -Infinity ? "-\u221e (masked)" :
      v !== v ? "NaN" : K.fmt(v, D); }

    if (P.title) K.div("attnlib-title", root, P.title);
    var controls = K.div("attnlib-controls", root), select = null;
    if (P.examples.length > 1) {
      select = K.picker(controls, "sentence", P.examples.map(function (x) { return x.name; }),
        function (e) { S.ex = e; S.row = -1; render(); });
    }
    var clear = K.button("attnlib-clear", controls, "clear row",
      "clear the followed query row (Esc)", function () { S.row = -1; render(); });
    var hint = K.div("attnlib-heads-hint", root, "");
    var gridBox = K.div("attnlib-heads-grid", root);
    gridBox.setAttribute("role", "group");
    gridBox.setAttribute("aria-label", L + " layers by " + H +
      " heads; arrow keys move, Enter enlarges a head");
    var big = K.div("attnlib-heads-big", root), tip = K.tip(root), thumbs = [],
      canvases = [], size = 40, hm = null;

    /* the grid of thumbnails: built once (per width); redrawn in place */
    function buildGrid() {
      gridBox.textContent = ""; thumbs = []; canvases = [];
      var wide = K.width(root) - 56 >= H * 38, lab = wide ? 56 : 28;
      size = Math.max(22, Math.min(72, Math.floor((K.width(root) - lab) / H) - 4));
      wide = wide && size >= 34;
      gridBox.style.gridTemplateColumns = lab + "px repeat(" + H + ", " + (size + 4) + "px)";
      K.div("attnlib-heads-corner", gridBox, "");
      for (var h = 0; h < H; h++) K.div("attnlib-heads-col", gridBox,
        (wide ? "head " : "") + P.dims[1].labels[h]);
      for (var l = 0; l < L; l++) {
        K.div("attnlib-heads-row", gridBox, (wide ? "layer " : "L") + P.dims[0].labels[l]);
        for (h = 0; h < H; h++) {
          (function (l, h) {
            var b = K.button("attnlib-heads-thumb", gridBox, undefined, "layer " +
              P.dims[0].labels[l] + ", head " + P.dims[1].labels[h] + ": enlarge", function () {
              S.focus = [l, h];
              S.open = S.open && S.open[0] === l && S.open[1] === h ? null : [l, h];
              render();
            });
            b.setAttribute("data-layer", l); b.setAttribute("data-head", h);
            var c = document.createElement("canvas");
            b.appendChild(c);
            b.addEventListener("mousemove", function (e) { hoverThumb(l, h, b, c, e); });
            b.addEventListener("mouseleave", tip.hide);
            b.addEventListener("keydown", function (e) {
              var dl = { ArrowDown: 1, ArrowUp: -1 }[e.key] || 0, dh = { ArrowRight: 1,
                ArrowLeft: -1 }[e.key] || 0;
              if (e.key === "Escape") { S.row = -1; render(); e.preventDefault(); return; }
              if (!dl && !dh) return;
              e.preventDefault();
              S.focus = [Math.max(0, Math.min(L - 1, l + dl)),
                Math.max(0, Math.min(H - 1, h + dh))];
              rove(); thumbs[S.focus[0] * H + S.focus[1]].focus();
            });
            thumbs.push(b); canvases.push(c);
          })(l, h);
        }
      }
    }
    function rove() { thumbs.forEach(function (b, n) { var t = n === S.focus[0] * H + S.focus[1] ?
      0 : -1; if (b.roved !== t) b.tabIndex = b.roved = t; }); }
    /* a thumbnail is one pixel per weight, scaled up by CSS (pixelated); the colours of an
       example are looked up once, and a thumbnail is repainted only when its example or the
       followed row changed (a click that enlarges a head repaints none) */
    var rgbs = [];
    function rgbOf(e) {
      if (rgbs[e]) return rgbs[e];
      var v = vals(e), out = new Uint8Array(v.length * 3);
      for (var n = 0; n < v.length; n++) {
        var hex = v[n] !== v[n] || v[n] === -Infinity ? "#9a9a9a" :
          K.colour(pal, v[n], P.vmin, P.vmax);
        out[3 * n] = parseInt(hex.substr(1, 2), 16); out[3 * n + 1] = parseInt(hex.substr(3, 2),
          16); out[3 * n + 2] = parseInt(hex.substr(5, 2), 16);
      }
      return (rgbs[e] = out);
    }
    function paintThumb(l, h) {
      var c = canvases[l * H + h], e = ex(), tq = e.rows.length, tk = e.cols.length,
        key = S.ex + ":" + S.row;
      if (c.painted === key) return;
      c.painted = key;
      var px = Math.max(1, Math.floor(size / Math.max(tq, tk)));
      c.width = tk; c.height = tq; c.style.width = px * tk + "px"; c.style.height = px * tq + "px";
      var g = c.getContext("2d"), img = g.createImageData(tk, tq), d = img.data, rgb = rgbOf(S.ex),
        base = (l * H + h) * tq * tk;
      for (var i = 0; i < tq; i++) {
        var a = S.row >= 0 && i !== S.row ? 46 : 255; /* other rows faded to 0.18
           while one is followed */
        for (var j = 0; j < tk; j++) {
          var n = i * tk + j, m = 3 * (base + n);
          d[4 * n] = rgb[m]; d[4 * n + 1] = rgb[m + 1]; d[4 * n + 2] = rgb[m + 2]; d[4 * n + 3] = a;
        }
      }
      g.putImageData(img, 0, 0);
    }
    function hoverThumb(l, h, b, c, e) {
      var r = c.getBoundingClientRect(), x = ex(), tq = x.rows.length, tk = x.cols.length;
      var j = Math.floor((e.clientX - r.left) / r.width * tk), i = S.row >= 0 ? S.row :
        Math.floor((e.clientY - r.top) / r.height * tq);
      if (j < 0 || j >= tk || i < 0 || i >= tq) { tip.hide(); return; }
      tip.show(b, ["layer " + P.dims[0].labels[l] + " \u00b7 head " + P.dims[1].labels[h] +
        ": query " + K.quoted(x.rows[i]) + " \u2192 key " + K.quoted(x.cols[j]),
        P.valueName + " = " + fmtv(w(l, h, i, j)), "click to " + (S.open && S.open[0] === l &&
          S.open[1] === h ? "close" : "enlarge")], gridBox);
    }
    var bigKey = null; /* what the enlarged head shows: a new followed row is drawn in place */
    function drawBig() {
      var key = S.ex + ":" + (S.open ? S.open.join(",") : "none") + ":" + K.width(root);
      if (key === bigKey && hm) { hm.select(S.row); return; }
      if (key === bigKey && !S.open) return;
      bigKey = key;
      var hadFocus = hm && document.activeElement === hm.svg;
      big.textContent = ""; hm = null;
      if (!S.open) { K.div("attnlib-hint", big, "Click a head to enlarge it."); return; }
      var l = S.open[0], h = S.open[1], x = ex(), tq = x.rows.length, tk = x.cols.length;
      K.div("attnlib-heads-bighead", big, "layer " + P.dims[0].labels[l] + ", head " +
        P.dims[1].labels[h] + (P.examples.length > 1 ? " \u00b7 " + x.name : ""));
      var fig = K.div("attnlib-figure", big);
      hm = K.heatmap({ parent: fig, avail: K.width(root) - 70, rows: x.rows, cols: x.cols,
        palette: pal, lo: P.vmin, hi: P.vmax, digits: D, value: function (i, j) { var v = w(l, h, i,
        j); return v === -Infinity || v !== v ? 0 : v; },
        masked: function (i, j) { var v = w(l, h, i, j); return v === -Infinity || v !== v; },
        selected: S.row, cellText: true, cellMax: 34, cellMin: 4, hatchId: "attnlib-hatch-" + uid,
          rowTitle: "query", colTitle: "key",
        label: "layer " + l + ", head " + h + ": " + P.valueName + "s, " + tq + " queries by " +
          tk + " keys; Enter follows a query row through every head",
        onRow: function (i) { S.row = S.row === i ? -1 : i; render(); }, onCell: function (i) {
          S.row = S.row === i ? -1 : i; render(); },
        onEscape: function () { S.row = -1; render(); },
        onHover: function (i, j, rect) {
          tip.show(rect, ["query " + K.quoted(x.rows[i]) + " (" + i + ") \u2192 key " +
            K.quoted(x.cols[j]) + " (" + j + ")", P.valueName + " = " + fmtv(w(l, h, i, j)),
            "layer " + P.dims[0].labels[l] + " \u00b7 head " + P.dims[1].labels[h]], fig);
        }, onLeave: tip.hide });
      K.colourbar(fig, pal, P.vmin, P.vmax, Math.max(100, Math.min(220, tq * hm.cell)),
        P.valueName, "attnlib-grad-" + uid);
      if (hadFocus) hm.svg.focus();
    }
    function render() {
      tip.hide();
      if (select) select.value = String(S.ex);
      var key = S.ex + ":" + K.width(root);
      if (buildGrid._key !== key) { buildGrid(); buildGrid._key = key; }
      for (var l = 0; l < L; l++) for (var h = 0; h < H; h++) {
        var b = thumbs[l * H + h], on = !!(S.open && S.open[0] === l && S.open[1] === h);
        if (b.on !== on) {
          b.on = on;
          K.toggle(b, on);
          b.setAttribute("aria-label", "layer " + P.dims[0].labels[l] + ", head " +
            P.dims[1].labels[h] + (on ? ": enlarged (press to close)" : ": enlarge"));
        }
        paintThumb(l, h);
      }
      rove();
      clear.disabled = S.row < 0;
      var x = ex();
      hint.textContent = S.row >= 0 ? "Every head shows only the row of query " +
        K.quoted(x.rows[S.row]) + " (position " + S.row + "): where it looks in each head."
        : "Each thumbnail is one head: rows are queries, columns keys. Hover for a " +
          "weight, click to enlarge.";
      drawBig();
      root.setAttribute("data-state", ["example=" + S.ex, "open=" + (S.open ? S.open.join(",") :
        "none"), "row=" + S.row].join(";"));
    }
    root.attnlibHeads = { weight: function (l, h, i, j) { return w(l, h, i, j); },
      open: function () { return S.open; } };
    K.keepKeys(root);
    render();
    K.onResize(root, render);
  }

  K.boot(document.currentScript, "attnlib-heads", init, "heads grid");
})();

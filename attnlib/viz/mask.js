/* attnlib mask explorer: a mask the reader clicks; the weights softmax(q k^T / sqrt(d) + M) are
   recomputed by the shared attention engine from the mask as written in the chosen convention. */
(function () {
  "use strict";
  var K = window.attnlibKit, E = window.attnlibEngine;
  var NAMES = { sdpa: "SDPA bool (True = may attend)",
    additive: "additive float (0 / \u2212\u221e)", nn_mha:
    "nn.MultiheadAttention bool (True = blocked)", hf: "HF attention_mask (1 = real token)" };
  /* the mask written as code in each convention, with the page's own values */
  function pyList(rows, f) {
    return rows.map(function (r, i) { return (i ? "     " : "    [") + "[" + r.map(f).join(", ") +
      "]"; }).join(",\n") + "]";
  }
  function codeFor(conv, w, n, causal) {
    var rows = [];
    if (conv === "hf") {
      return "# 1 = real token, 0 = padding: one flag per key\nattention_mask = torch.tensor([[" +
        w.join(", ") + "]])\n" + "model(input_ids, attention_mask=attention_mask)" + (causal ?
        "\n# the model adds its causal mask itself" : "");
    }
    for (var i = 0; i < n; i++) rows.push(w.slice(i * n, (i + 1) * n));
    if (conv === "additive") {
      return "# float, added to the scores: 0 = allowed, -inf = blocked\nmask = torch.tensor(\n" +
        pyList(rows, function (v) { return v === -Infinity ? "-inf" : " 0.0"; }) + ")\n" +
        "weights = torch.softmax(q @ k.T / d**0.5 + mask, dim=-1)";
    }
    return "# bool: " + (conv === "sdpa" ? "True = may attend" : "True = blocked") + "\nmask = " +
      "torch.tensor(\n" + pyList(rows, function (v) { return v ? " True" : "False"; }) + ")\n" +
      (conv === "sdpa" ? "F.scaled_dot_product_attention(\n    q, k, v, " +
        "attn_mask=mask)   # attnlib's too"
        : "nn.MultiheadAttention(d, h)(\n    x, x, x, attn_mask=mask)");
  }

  function init(root, P) {
    var uid = K.uid(root), pal = K.palette(P.palette), D = P.digits, S = null;

    function fresh(e) {
      var x = P.examples[e], T = x.tokens.length;
      /* over: the reader's own cells, -1 = as the causal / padding mask says, 0
         = blocked, 1 = allowed */
      return { ex: e, causal: x.causal, pad: x.pad.slice(), over: new Int8Array(T * T).fill(-1),
        conv: S ? S.conv : P.convention, row: -1 };
    }
    function ex() { return P.examples[S.ex]; }
    function T() { return ex().tokens.length; }
    function base(i, j) { return (!S.causal || j <= i) && !S.pad[j]; }
    /* the reader's mask: causal AND not padding, with the clicked cells as
       clicked (1 = may attend) */
    function allowed() {
      var n = T(), a = new Uint8Array(n * n);
      for (var i = 0; i < n; i++) for (var j = 0; j < n; j++) { var o = S.over[i * n + j];
        a[i * n + j] = o < 0 ? (base(i, j) ? 1 : 0) : o; }
      return a;
    }
    function flipCount() { var c = 0; for (var i = 0; i < S.over.length;
      i++) c += S.over[i] >= 0 ? 1 : 0; return c; }
    function setPad(j, on) { var n = T(); S.pad[j] = on; for (var i = 0; i < n;
      i++) S.over[i * n + j] = -1; }
    /* the mask as the chosen convention writes it, and the engine's mask
       read back from that form */
    function written() {
      var n = T(), a = allowed();
      if (S.conv === "hf") return S.pad.map(function (p) { return p ? 0 : 1; });
      return E.toConvention(S.conv, E.boolMask(a, n, n));
    }
    function engineMask() {
      var n = T(), w = written();
      if (S.conv === "hf") return E.fromHF(w, n, S.causal);
      return E.fromConvention(S.conv, S.conv === "additive" ? Float64Array.from(w) : w, n, n);
    }
    function compute() {
      var n = T(), x = ex(), d = x.q[0].length;
      var q = Float64Array.from([].concat.apply([], x.q)),
        k = Float64Array.from([].concat.apply([], x.k));
      var m = engineMask(), r = E.attention(q, k, k, n, n, d, d, { mask: m });
      var raw = E.scores(q, k, n, n, d, null);
      var eff = new Uint8Array(n * n); /* what the engine was told, as 1 = may attend */
      for (var i = 0; i < n * n; i++) eff[i] = r.scores[i] === -Infinity ? 0 : 1;
      return { w: r.weights, raw: raw, scores: r.scores, dead: r.dead, eff: eff };
    }

    /* ---- the frame ---- */
    if (P.title) K.div("attnlib-title", root, P.title);
    var controls = K.div("attnlib-controls", root), select = null;
    if (P.examples.length > 1) {
      select = K.picker(controls, "start from", P.examples.map(function (x) { return x.name; }),
        function (e) { S = fresh(e); render(); });
    }
    var causalBtn = K.button("attnlib-mask-causal", controls, "causal mask",
      "causal mask: each query sees only itself and earlier keys", function () {
      S.causal = !S.causal; S.over.fill(-1); render();
    });
    var resetBtn = K.button("attnlib-mask-reset", controls, "reset",
      "back to the starting mask", function () {
      var c = S.conv; S = fresh(S.ex); S.conv = c; render();
    });
    var convBox = K.div("attnlib-mask-conventions", root);
    convBox.setAttribute("role", "group");
    convBox.setAttribute("aria-label", "write the mask in the convention of");
    K.div("attnlib-mask-label", convBox, "written as:", "span");
    var convBtns = {};
    ["sdpa", "additive", "nn_mha", "hf"].forEach(function (c) {
      convBtns[c] = K.button("attnlib-mask-conv", convBox, NAMES[c], NAMES[c], function () {
        S.conv = c; render(); });
      convBtns[c].setAttribute("data-convention", c);
    });
    K.div("attnlib-mask-how", root, "Click a cell of the mask to block or allow it; click a " +
      "key\u2019s name to make it padding (or a real token again).");
    var body = K.div("attnlib-body", root);
    var gridBox = K.div("attnlib-mask-gridbox", body), fig = K.div("attnlib-figure", body);
    var code = K.div("attnlib-mask-code", root, undefined, "pre");
    var note = K.div("attnlib-mask-note", root);
    note.setAttribute("aria-live", "polite");
    var detail = K.div("attnlib-mask-detail", root);
    var tip = K.tip(root), focus = [0, 0], hm = null, built = null;

    /* The grid is built once per starting state (and width); a click updates it in place, so the
       buttons a reader (or a test) holds stay the same elements. */
    var cells = [], keyBtns = [], corner = null, wide = false;
    function cellText(c, r, w) {
      if (S.conv === "sdpa" || S.conv === "nn_mha") return w[c] ? (wide ? "True" :
        "T") : (wide ? "False" : "F");
      if (S.conv === "additive") return w[c] === -Infinity ? "\u2212\u221e" : "0";
      return r.eff[c] ? "\u2713" : "\u00b7"; /* hf: the mask the model builds from the flags */
    }
    function buildGrid() {
      var n = T(), x = ex();
      gridBox.textContent = ""; cells = []; keyBtns = [];
      var avail = K.width(root), labW = 18 + K.CHAR_W * Math.min(10, Math.max.apply(null,
        x.tokens.map(function (t) { return K.shown(t, 10).length; })));
      var cell = Math.max(30, Math.min(52, Math.floor((avail - labW - 12) / n)));
      wide = cell >= 44;
      var g = K.div("attnlib-mask-grid", gridBox);
      g.style.gridTemplateColumns = labW + "px repeat(" + n + ", " + cell + "px)";
      g.setAttribute("role", "group");
      g.setAttribute("aria-label", "the mask: one row per query, one column per key; arrow keys " +
        "move, Enter or Space toggles");
      corner = K.div("attnlib-mask-corner", g, "");
      x.tokens.forEach(function (t, j) { /* key headers: padding on / off */
        keyBtns.push(K.button("attnlib-mask-key", g, "", "", function () {
          setPad(j, !S.pad[j]); render(); }));
      });
      for (var i = 0; i < n; i++) {
        K.div("attnlib-mask-qlabel", g, K.shown(x.tokens[i], 10));
        for (var j = 0; j < n; j++) {
          (function (i, j) {
            var c = i * n + j;
            var b = K.button("attnlib-mask-cell", g, "", "", function () {
              focus = [i, j];
              if (S.conv === "hf") setPad(j, !S.pad[j]);
              else { var now = allowed()[c] ? 0 : 1; S.over[c] = now === (base(i,
                j) ? 1 : 0) ? -1 : now; }
              render();
            });
            b.setAttribute("data-row", i); b.setAttribute("data-col", j);
            b.addEventListener("keydown", function (e) {
              var di = { ArrowDown: 1, ArrowUp: -1 }[e.key] || 0, dj = { ArrowRight: 1,
                ArrowLeft: -1 }[e.key] || 0;
              if (!di && !dj) return;
              e.preventDefault();
              focus = [Math.max(0, Math.min(n - 1, i + di)), Math.max(0, Math.min(n - 1, j + dj))];
              rove(); cells[focus[0] * n + focus[1]].focus();
            });
            cells.push(b);
          })(i, j);
        }
      }
    }
    function rove() { cells.forEach(function (b, c) { b.tabIndex = c === focus[0] * T() +
      focus[1] ? 0 : -1; }); }
    function paintGrid(r) {
      var n = T(), x = ex(), w = written(), hf = S.conv === "hf";
      corner.textContent = hf ? "flag" : "query\u2193 key\u2192";
      keyBtns.forEach(function (b, j) {
        var t = x.tokens[j];
        b.textContent = hf ? (S.pad[j] ? "0" : "1") : K.shown(t, 6);
        b.className = "attnlib-mask-key" + (S.pad[j] ? " attnlib-mask-padkey" : "");
        b.setAttribute("aria-label", "key " + t + ": " + (S.pad[j] ?
          "padding (press to make it a real token)" : "a real token (press to make it padding)"));
        K.toggle(b, S.pad[j]);
        b.title = K.quoted(t) + (hf ? ": attention_mask " + (S.pad[j] ? "0" : "1") :
          S.pad[j] ? ": padding" : "");
      });
      cells.forEach(function (b, c) {
        var i = Math.floor(c / n), j = c % n, ok = r.eff[c];
        K.plate(b, cellText(c, r, w)); /* readable on the hatch */
        b.className = "attnlib-mask-cell" + (ok ? " attnlib-mask-ok" : " attnlib-mask-no") +
          (S.over[c] >= 0 && !hf ? " attnlib-mask-flipped" : "");
        b.setAttribute("aria-label", "query " + x.tokens[i] + ", key " + x.tokens[j] + ": " + (ok ?
          "may attend" : "blocked") + (hf ? " (built by the model from the key's flag)" : ""));
        K.toggle(b, !ok);
        b.title = hf ? "the model builds this cell from the attention_mask" + (S.causal ?
          " and its causal mask" : "") + "; a click sets the key's flag" : "";
      });
      rove();
    }
    function drawWeights(r) {
      var hadFocus = hm && document.activeElement === hm.svg, n = T(),
        x = ex(), avail = K.width(root);
      var gridW = gridBox.getBoundingClientRect().width;
      fig.textContent = "";
      /* beside the grid when both fit, else below it at the full width */
      var room = avail - gridW - 20 >= 220 ? avail - gridW - 20 : avail;
      hm = K.heatmap({ parent: fig, avail: room - 70, rows: x.tokens, cols: x.tokens, palette: pal,
        lo: 0, hi: 1, digits: D, value: function (i, j) { return r.w[i * n + j]; },
        masked: function (i, j) { return !r.eff[i * n + j]; },
        dead: function (i) { return r.dead[i]; }, selected: S.row, cellText: true,
          cellMax: 44, cellMin: 20,
        hatchId: "attnlib-hatch-" + uid, rowTitle: "query", colTitle: "key",
        label: "attention weights under this mask, " + n + " queries by " + n +
          " keys; Enter shows a row's arithmetic",
        onCell: function (i) { S.row = S.row === i ? -1 : i; render(); }, onRow: function (i) {
          S.row = S.row === i ? -1 : i; render(); },
        onEscape: function () { S.row = -1; render(); },
        onHover: function (i, j, rect) {
          var blocked = !r.eff[i * n + j];
          tip.show(rect, ["query " + K.quoted(x.tokens[i]) + " (" + i + ") \u2192 key " +
            K.quoted(x.tokens[j]) + " (" + j + ")", "weight = " + K.fmt(r.w[i * n + j],
            D) + (blocked ? " (blocked)" : ""),
            r.dead[i] ? "no key left for this query: zeros" : "score " + K.fmt(r.raw[i * n + j],
              D) + (blocked ? " + \u2212\u221e" : " + 0")], fig);
        }, onLeave: tip.hide });
      K.colourbar(fig, pal, 0, 1, Math.max(90, Math.min(200, n * hm.cell)),
        "weight", "attnlib-grad-" + uid);
      /* the convention the weights were computed from, written on the drawing */
      var said = "M read from: " + NAMES[S.conv];
      K.el("text", { "class": "attnlib-axis", x: 4, y: +hm.svg.getAttribute("height") + 14 },
        hm.svg, said);
      hm.svg.setAttribute("height", +hm.svg.getAttribute("height") + 20);
      /* a few tokens make a narrow grid: the drawing widens to hold the whole line */
      hm.svg.setAttribute("width", Math.max(+hm.svg.getAttribute("width"),
        Math.ceil(12 + K.AXIS_CHAR_W * said.length)));
      hm.svg.setAttribute("viewBox", "0 0 " + hm.svg.getAttribute("width") + " " +
        hm.svg.getAttribute("height"));
      if (hadFocus) hm.svg.focus();
    }
    function drawDetail(r) {
      detail.textContent = "";
      var n = T(), x = ex();
      if (S.row < 0) { K.div("attnlib-hint", detail, "Click a row of the weights (or a query) to " +
        "see its arithmetic: score, + mask, softmax."); return; }
      var i = S.row;
      K.div("attnlib-bars-head", detail, "query " + K.quoted(x.tokens[i]) +
        ": softmax(score + M) over the keys");
      var t = K.div("attnlib-mask-table", detail, undefined, "table"),
        h = K.div("", t, undefined, "tr");
      ["key", "score q\u00b7k/\u221ad", "M (" + (S.conv === "hf" ? "built by the model" : S.conv) +
        ")", "weight"].forEach(function (s) { K.div("", h, s, "th"); });
      for (var j = 0; j < n; j++) {
        var row = K.div(r.eff[i * n + j] ? "" : "attnlib-mask-blockedrow", t, undefined, "tr");
        K.div("", row, K.shown(x.tokens[j], 10), "td");
        K.div("", row, K.fmt(r.raw[i * n + j], D), "td");
        K.div("", row, r.eff[i * n + j] ? "0" : "\u2212\u221e", "td");
        K.div("", row, K.fmt(r.w[i * n + j], D), "td");
      }
    }
    function drawNote(r) {
      note.textContent = "";
      var x = ex(), dead = [];
      r.dead.forEach(function (d, i) { if (d) dead.push(K.quoted(x.tokens[i])); });
      if (dead.length) {
        K.div("attnlib-mask-dead", note, "No key left for " + dead.join(", ") +
          ": every score in " + (dead.length > 1 ? "those rows" : "that row") +
          " is \u2212\u221e, so a plain softmax computes 0/0 = NaN; attnlib (and this page) " +
            "return zeros for such a row.");
      }
      if (S.conv === "hf" && flipCount()) {
        K.div("attnlib-mask-lost", note, "HF's attention_mask holds one flag per key, so your " +
          flipCount() + " single-cell edit" +
          (flipCount() > 1 ? "s are" : " is") + " not in it: the weights here are what a model " +
            "builds from the flags" + (S.causal ? " and its causal mask." : "."));
      }
      if (S.conv === "hf" && !S.causal) K.div("", note,
        "(With the causal mask off, the model here is an encoder: it uses the flags alone.)");
    }
    function stateString(r) {
      var a = allowed(), s = "";
      for (var i = 0; i < a.length; i++) s += a[i];
      return ["example=" + S.ex, "convention=" + S.conv, "causal=" + (S.causal ? 1 : 0),
        "pad=" + S.pad.map(function (p) { return p ? 1 : 0; }).join(""), "mask=" + s,
        "row=" + S.row, "dead=" + r.dead.filter(Boolean).length].join(";");
    }
    function render() {
      tip.hide();
      if (select) select.value = String(S.ex);
      K.toggle(causalBtn, S.causal);
      for (var c in convBtns) {
        K.toggle(convBtns[c], c === S.conv);
        convBtns[c].disabled = c === S.conv; /* the one in use: pressed, nothing to do */
      }
      var st0 = fresh(S.ex);
      resetBtn.disabled = S.causal === st0.causal && S.pad.join() === st0.pad.join() &&
        !flipCount() && S.row < 0;
      var r = compute();
      code.textContent = codeFor(S.conv, written(), T(), S.causal);
      if (built !== S.ex + ":" + K.width(root)) { buildGrid(); built = S.ex + ":" + K.width(root); }
      paintGrid(r); drawWeights(r); drawDetail(r); drawNote(r);
      root.setAttribute("data-state", stateString(r));
    }

    root.attnlibMask = {
      weights: function () { return Array.from(compute().w); },
      written: function () { return written().map(function (v) {
        return v === -Infinity ? null : v; }); },
      allowed: function () { return Array.from(compute().eff); },
      dead: function () { return compute().dead; }
    };
    K.keepKeys(root);
    S = fresh(0);
    render();
    K.onResize(root, render);
  }

  K.boot(document.currentScript, "attnlib-mask", init, "mask explorer");
})();

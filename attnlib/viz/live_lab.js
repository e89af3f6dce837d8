/* attnlib live model, the laboratory: three panels under the live model, each an explorer of its
   own (root div.attnlib-explorer, data-state, svg.attnlib-plot), all computed in the page by the
   live model's forward pass (live_model.js), which runs attention through the shared engine:
     - switch heads off (a head's output zeroed before out_proj) and compare the next-token
       probabilities and the greedy continuation with all heads on; guided experiments;
     - the logit lens: the final LayerNorm and the LM head applied after every layer;
     - one token through the whole network, step by step, with the real numbers and shapes and the
       attnlib module that computes each step. */
window.attnlibLiveLab = function (api) {
  "use strict";
  var K = window.attnlibKit, P = api.P, c = api.c, main = api.root;
  var seq = K.palette(P.palette), div = K.palette(P.paletteDiv), CONT = 24;
  var lastPanel = main;
  function panel(cls, title, label) {
    var r = document.createElement("div");
    r.className = "attnlib-explorer attnlib-kit attnlib-lab " + cls;
    r.setAttribute("data-attnlib-ready", "1");
    r.setAttribute("role", "group");
    r.setAttribute("aria-label", label);
    r.setAttribute("data-state", "");
    lastPanel.parentNode.insertBefore(r, lastPanel.nextSibling);
    lastPanel = r;
    K.div("attnlib-title", r, title);
    K.keepKeys(r);
    return r;
  }
  function ids() { return api.state().ids; }
  function tok(id) { return P.vocab[id]; }
  function text(idsList) { return idsList.map(tok).join(""); }
  function hashIds(a) { var h = 2166136261; for (var i = 0; i < a.length; i++) h = Math.imul(h ^
    (a[i] + 1), 16777619) >>> 0; return h.toString(16); }
  /* a slider over the positions of the text, its read-out the token there */
  function position(parent, label, oninput) {
    function at(v) { var id = ids()[v]; return id === undefined ? "" : K.quoted(tok(id)); }
    return K.slider(parent, "position", { label: label, text: function (v) {
      return at(v) + " (" + v + ")"; }, valueText: function (v) { return "position " + v + ", " +
      at(v); }, oninput: oninput });
  }

  /* ================================================================ 1. switch heads off */
  var A = { root: panel("attnlib-lab-heads", "Switch heads off",
    "switch attention heads off"), sel: -1 };
  if (P.experiments && P.experiments.length) {
    var exBox = K.div("attnlib-lab-experiments", A.root);
    K.div("attnlib-lab-subhead", exBox, "Try these");
    P.experiments.forEach(function (e, n) {
      var row = K.div("attnlib-lab-experiment", exBox);
      K.div("", row, e.sentence, "p");
      K.button("attnlib-lab-try", row, "set it up", "experiment " + (n + 1) + ": " + e.sentence,
        function () { runExperiment(e); });
    });
  }
  K.div("attnlib-lab-how", A.root, "Each button is one head; pressed = switched off: its output " +
    "is set to zero where the heads are merged, " +
    "so the rest of the network no longer receives it. The live " +
      "model above and every panel below use the heads you leave on.");
  var grid = K.div("attnlib-lab-grid", A.root), headBtns = [];
  grid.style.gridTemplateColumns = "auto repeat(" + c.H + ", 64px)";
  for (var l = 0; l < c.L; l++) {
    K.div("attnlib-lab-layer", grid, "layer " + l);
    for (var h = 0; h < c.H; h++) {
      (function (l, h) {
        /* one name whatever the state (pressed = switched off, aria-pressed says which) */
        var b = K.button("attnlib-lab-head", grid, "", "switch off layer " + l +
          ", head " + h, function () {
          var off = api.state().off.map(function (r) { return r.slice(); });
          off[l][h] = off[l][h] ? 0 : 1;
          api.setOff(off);
        });
        K.plate(b, "head " + h); /* readable on the hatch when pressed */
        b.setAttribute("data-layer", l); b.setAttribute("data-head", h);
        headBtns.push(b);
      })(l, h);
    }
  }
  var allOnBtn = K.button("attnlib-lab-allon", K.div("attnlib-controls", A.root), "all heads on",
    "switch every head back on", function () { api.setOff(api.allOn()); });
  var Afig = K.div("attnlib-figure", A.root), Acont = K.div("attnlib-lab-cont",
    A.root), Atip = K.tip(A.root);

  function paintHeads() {
    var S = api.state(), n = ids().length, intact = api.allOn();
    headBtns.forEach(function (b) {
      var l = +b.getAttribute("data-layer"), h = +b.getAttribute("data-head"), off = !S.off[l][h];
      K.toggle(b, off);
      b.title = off ? "switched off: click to switch it back on" : "on: click to switch it off";
    });
    allOnBtn.disabled = api.nOff() === 0;
    Afig.textContent = ""; Acont.textContent = "";
    if (!n) { K.div("attnlib-hint", Afig, "Type some text above.");
      A.root.setAttribute("data-state", "ids=none"); return; }
    var now = api.softmax(S.logits[n - 1]),
      ref = api.softmax(api.trace(ids(), n - 1, intact).logits);
    var order = [];
    for (var i = 0; i < c.V; i++) order.push(i);
    var top = {};
    [ref, now].forEach(function (p) { order.slice().sort(function (a, b) { return p[b] - p[a] ||
      a - b; }).slice(0, 6).forEach(function (id) { top[id] = 1; }); });
    var cols = Object.keys(top).map(Number).sort(function (a, b) {
      return ref[b] - ref[a] || a - b; });
    var rows = [ref, now], off = api.offList();
    if (A.sel >= cols.length) A.sel = -1;
    K.div("attnlib-lab-subhead", Afig, "next character after " + K.quoted(tok(ids()[n - 1])) +
      " (the end of the text above)");
    var hm = K.heatmap({ parent: Afig, avail: A.w - 70, rows: ["all heads on",
      off.length + (off.length === 1 ? " head off" : " heads off")], cols: cols.map(tok),
      palette: seq, lo: 0, hi: 1,
      digits: 4, cellText: true, cellMax: 48, cellMin: 30, rowLabelClass: "attnlib-qlabel",
      hatchId: "attnlib-hatch-lab-" + api.uid, selectedCol: A.sel, colLabelAngle: 0,
      label: "next-character probabilities with all heads on and with the heads switched off",
      value: function (r, j) { return rows[r][cols[j]]; },
      onCell: function (r, j) { A.sel = A.sel === j ? -1 : j; paintHeads(); },
      onHover: function (r, j, rect) {
        Atip.show(rect, [K.quoted(tok(cols[j])) + (r ? (off.length ? " without " + off.join(", ") :
          "") : " with all heads on"), "probability = " + K.fmt(rows[r][cols[j]], 4),
          "all on " + K.fmt(ref[cols[j]], 4) + " \u2192 now " + K.fmt(now[cols[j]], 4)], Afig);
      }, onLeave: Atip.hide });
    K.el("text", { "class": "attnlib-axis", x: 4, y: +hm.svg.getAttribute("height") + 12 }, hm.svg,
      "heads off: " + (off.join(", ") || "none"));
    hm.svg.setAttribute("height", +hm.svg.getAttribute("height") + 18);
    hm.svg.setAttribute("viewBox", "0 0 " + hm.svg.getAttribute("width") + " " +
      hm.svg.getAttribute("height"));
    if (A.sel >= 0) {
      var id = cols[A.sel];
      K.div("attnlib-lab-note", Afig, K.quoted(tok(id)) + ": " + K.fmt(ref[id],
        3) + " with every head, " + K.fmt(now[id], 3) + (off.length ? " without " + off.join(", ") :
        " (no head is off)") + ".");
    }
    var prompt = ids().slice(0, S.nPrompt), a = api.greedy(prompt, CONT, intact),
      b = api.greedy(prompt, CONT, S.off);
    K.div("attnlib-lab-subhead", Acont,
      "The next " + CONT + " characters of your text (greedy: always the most likely)");
    [["all heads on", a], [off.length ? "without " + off.join(", ") : "your heads (none off)",
      b]].forEach(function (pair, k) {
      var line = K.div("attnlib-lab-contline", Acont);
      K.div("attnlib-live-label", line, pair[0] + ": ", "span");
      var out = K.div("attnlib-lab-conttext", line, undefined, "span");
      pair[1].forEach(function (id, j) {
        var sp = K.div(k && id !== a[j] ? "attnlib-lab-diff" : "", out, tok(id) === "\n" ?
          "\u23ce" : tok(id), "span");
      });
      out.setAttribute("data-ids", pair[1].join(","));
    });
    A.root.setAttribute("data-state", ["ids=" + hashIds(ids()), "off=" + (off.join(",") || "none"),
      "token=" + A.sel].join(";"));
  }

  /* ================================================================ 2. the logit lens */
  var B = { root: panel("attnlib-lab-lens", "Logit lens: what the model would say after each layer",
    "logit lens"), pos: -1, token: -1 };
  K.div("attnlib-lab-how", B.root, "Each row applies the final LayerNorm and the LM head to the " +
    "residual stream after the embedding and after each " +
    "layer; the last row is the model's real prediction.");
  var Bctl = K.div("attnlib-controls", B.root);
  var Brange = position(Bctl, "position whose prediction the lens shows", function (v) {
    B.pos = v; paintLens(); });
  var Bfig = K.div("attnlib-figure", B.root), Bnote = K.div("attnlib-lab-note",
    B.root), Btip = K.tip(B.root);

  function paintLens() {
    var n = ids().length;
    Bfig.textContent = ""; Bnote.textContent = "";
    if (!n) { B.root.setAttribute("data-state", "ids=none"); return; }
    if (B.pos < 0 || B.pos >= n) B.pos = n - 1;
    Brange.max = String(n - 1); Brange.show(B.pos);
    var tr = api.trace(ids(), B.pos), probs = tr.lens.map(api.softmax), R = 5;
    var tops = probs.map(function (p) {
      var o = []; for (var i = 0; i < c.V; i++) o.push(i);
      return o.sort(function (a, b) { return p[b] - p[a] || a - b; }).slice(0, R);
    });
    var names = ["embedding"];
    for (var l = 0; l < c.L; l++) names.push("layer " + l + (l === c.L - 1 ? " = output" : ""));
    var actual = B.pos + 1 < n ? ids()[B.pos + 1] : -1;
    var hm = K.heatmap({ parent: Bfig, avail: B.w - 70, rows: names, cols: ["1st", "2nd", "3rd",
      "4th", "5th"], palette: seq, lo: 0, hi: 1, digits: 4, cellMax: 56, cellMin: 30, rowLabelClass:
      "attnlib-qlabel", colLabelAngle: 0, labelChars: 20, hatchId: "attnlib-hatch-lens-" + api.uid,
      label: "top 5 next characters after the embedding and after each layer, for position " +
        B.pos,
      value: function (i, j) { return probs[i][tops[i][j]]; },
      cellLabel: function (i, j) { return K.shown(tok(tops[i][j]), 3); },
      framed: function (i, j) { return B.token >= 0 && tops[i][j] === B.token; },
      onCell: function (i, j) { B.token = B.token === tops[i][j] ? -1 : tops[i][j]; paintLens(); },
      onHover: function (i, j, rect) {
        Btip.show(rect, [names[i] + ", rank " + (j + 1) + ": " + K.quoted(tok(tops[i][j])),
          "probability = " + K.fmt(probs[i][tops[i][j]], 4), tops[i][j] === actual ?
          "the character that really follows" : ""], Bfig);
      }, onLeave: Btip.hide });
    K.el("text", { "class": "attnlib-axis", x: 4, y: +hm.svg.getAttribute("height") + 12 }, hm.svg,
      "position " + B.pos + ": after " + K.quoted(tok(ids()[B.pos])));
    hm.svg.setAttribute("height", +hm.svg.getAttribute("height") + 18);
    hm.svg.setAttribute("viewBox", "0 0 " + hm.svg.getAttribute("width") + " " +
      hm.svg.getAttribute("height"));
    var follow = B.token >= 0 ? B.token : actual;
    if (follow >= 0) {
      K.div("", Bnote, (B.token >= 0 ? "" : "The text continues with ") + K.quoted(tok(follow)) +
        ": probability " + probs.map(function (p) { return K.fmt(p[follow], 3);
        }).join(" \u2192 ") + " (embedding \u2192 layer " + (c.L - 1) + ")." +
        (B.token >= 0 ? "" : " Click a cell to follow another character."));
    }
    B.root.setAttribute("data-state", ["ids=" + hashIds(ids()), "pos=" + B.pos, "token=" + B.token,
      "off=" + (api.offList().join(",") || "none")].join(";"));
  }

  /* ================================================================ 3. one token, step by step */
  var C = { root: panel("attnlib-lab-steps", "One token through the network, step by step",
    "one token through the network"), pos: -1, step: 0, sel: -1 };
  K.div("attnlib-lab-how", C.root, "The real numbers of one position, from its embedding to the " +
    "logits, as the model above computes them " + "(with the heads you left on). Each step names " +
    "the attnlib module that computes it.");
  var Cctl = K.div("attnlib-controls", C.root);
  var Crange = position(Cctl, "position to follow through the network", function (v) { C.pos = v;
    C.sel = -1; paintSteps(); });
  var prev = K.button("attnlib-lab-prev", Cctl, "\u25c2 previous step", "previous step",
    function () { C.step--; C.sel = -1; paintSteps(); });
  var next = K.button("attnlib-lab-next", Cctl, "next step \u25b8", "next step", function () {
    C.step++; C.sel = -1; paintSteps(); });
  var Cselect = K.div("attnlib-lab-stepselect", K.div("attnlib-control", Cctl, undefined,
    "label"), undefined, "select");
  Cselect.setAttribute("aria-label", "step");
  Cselect.addEventListener("change", function () { C.step = +Cselect.value;
    C.sel = -1; paintSteps(); });
  var Chead = K.div("attnlib-lab-stephead", C.root), Cfn = K.div("attnlib-lab-fn",
    C.root, undefined, "code");
  var Cfig = K.div("attnlib-figure", C.root), Cnums = K.div("attnlib-lab-nums",
    C.root), Ctip = K.tip(C.root);
  var NAMES = { embed: "embedding", norm1: "LayerNorm", qkv: "queries, keys, values",
    weights: "attention weights", out: "heads merged, out_proj",
    add1: "residual add", norm3: "LayerNorm", ffn1: "feed-forward, first half",
      ffn2: "feed-forward, second half + residual", normf: "final LayerNorm", logits: "logits" };

  function paintSteps() {
    var n = ids().length;
    Cfig.textContent = ""; Cnums.textContent = ""; Chead.textContent = ""; Cfn.textContent = "";
    if (!n) { C.root.setAttribute("data-state", "ids=none"); return; }
    if (C.pos < 0 || C.pos >= n) C.pos = n - 1;
    Crange.max = String(n - 1); Crange.show(C.pos);
    var steps = api.trace(ids(), C.pos).steps;
    C.step = Math.max(0, Math.min(steps.length - 1, C.step));
    if (Cselect.options.length !== steps.length) {
      Cselect.textContent = "";
      steps.forEach(function (st, k) {
        K.div("", Cselect, (k + 1) + ". " + (st.layer >= 0 && st.layer < c.L ?
          "layer " + st.layer + ": " : "") + NAMES[st.key], "option").value = String(k);
      });
    }
    Cselect.value = String(C.step);
    prev.disabled = C.step === 0; next.disabled = C.step === steps.length - 1;
    var st = steps[C.step];
    Chead.textContent = "Step " + (C.step + 1) + " of " + steps.length + ": " + (st.layer >= 0 &&
      st.layer < c.L ? "layer " + st.layer + ", " : "") + NAMES[st.key];
    Cfn.textContent = st.fn;
    var rows, cols, vals, lo, hi, pal, digits = 3, kind;
    if (st.weights) {
      kind = "weights";
      rows = st.weights.map(function (_, h) { return "head " + h + (st.off &&
        !st.off[h] ? " (off)" : ""); });
      cols = ids().slice(0, C.pos + 1).map(function (id) { return tok(id); });
      vals = st.weights; lo = 0; hi = 1; pal = seq;
    } else if (st.logits) {
      /* the 16 most likely of the vocabulary, most likely first */
      kind = "logits";
      var p = api.softmax(st.logits), order = [];
      for (var i0 = 0; i0 < c.V; i0++) order.push(i0);
      order.sort(function (a, b) { return p[b] - p[a] || a - b; });
      order = order.slice(0, 16);
      rows = ["probability"]; cols = order.map(function (id) { return P.vocab[id]; });
      vals = [order.map(function (id) { return p[id]; })]; lo = 0; hi = 1; pal = seq; digits = 4;
      var logitOf = order.map(function (id) { return st.logits[id]; });
    } else {
      /* vectors, 64 numbers a row (a longer one, like the FFN's hidden layer, in rows of 64) */
      kind = "vectors"; rows = []; vals = [];
      st.rows.forEach(function (r) {
        var v = r[1], w = 64;
        if (v.length <= w) { rows.push(r[0]); vals.push(v); return; }
        for (var k0 = 0; k0 < v.length; k0 += w) { rows.push(r[0] + " " + k0 + "\u2013" +
          (k0 + w - 1)); vals.push(v.slice(k0, k0 + w)); }
      });
      cols = []; for (var j = 0; j < vals[0].length; j++) cols.push(String(j));
      var m = 1e-9; vals.forEach(function (v) { for (var k = 0; k < v.length;
        k++) m = Math.max(m, Math.abs(v[k])); });
      lo = -m; hi = m; pal = div;
    }
    var width = kind === "vectors" ? st.rows[0][1].length : vals[0].length;
    var shape = kind === "weights" ? "(" + c.H + " heads, " + width + " keys)" : kind === "logits" ?
      "(" + c.V + ",): the 16 most likely shown" : "(" + width + ",) each";
    var hm = K.heatmap({ parent: Cfig, avail: C.w - 8, rows: rows, cols: cols, palette: pal, lo: lo,
      hi: hi, digits: digits, cellMax: kind === "vectors" ? 12 : 30, cellMin: kind === "logits" ?
      14 : 3, rowLabelClass: "attnlib-qlabel", colLabelAngle: 0,
      colEvery: kind === "vectors" ? 8 : 0, cellH: kind === "vectors" ? 16 : 0, labelChars: 20,
        hatchId: "attnlib-hatch-steps-" + api.uid,
      colTitle: kind === "weights" ? "key (the tokens so far)" : kind === "logits" ?
        "next character" : "component", selectedCol: C.sel,
      label: Chead.textContent + ", shape " + shape,
      value: function (i, j) { return vals[i][j]; },
      onCell: function (i, j) { C.sel = C.sel === j ? -1 : j; paintSteps(); },
      onHover: function (i, j, rect) {
        Ctip.show(rect, [rows[i] + (kind === "vectors" ? "[" + j + "]" : kind === "weights" ?
          " \u2192 key " + K.quoted(cols[j]) + " (" + j + ")" : ": " + K.quoted(cols[j])),
          (kind === "logits" ? "p = " : "") + K.fmt(vals[i][j], digits), kind === "logits" ?
            "logit " + K.fmt(logitOf[j], 3) : ""], Cfig);
      }, onLeave: Ctip.hide });
    var names = kind === "vectors" ? st.rows.map(function (r) { return r[0]; }) : [];
    K.div("attnlib-lab-shape", Cnums, "shape: " + (kind === "vectors" ? names.join(", ") + ": (" +
      width + ",)" + (names.length > 1 ? " each" : "")
      : shape) + (st.key === "qkv" ? " = " + c.H + " heads \u00d7 " + (c.C / c.H) : ""));
    if (kind === "logits") {
      K.div("", Cnums, "most likely: " + cols.slice(0, 5).map(function (t, k) {
        return K.quoted(t) + " " + K.fmt(vals[0][k], 3); }).join(", "));
    } else {
      rows.forEach(function (r, i) {
        var v = Array.prototype.slice.call(vals[i], 0, 6).map(function (x) { return K.fmt(x, 3); });
        K.div("attnlib-lab-numline", Cnums, r + " = [" + v.join(", ") + (vals[i].length > 6 ?
          ", \u2026" : "") + "]" + (C.sel >= 0 ? "   [" + C.sel + "] = " +
          K.fmt(vals[i][C.sel], 4) : ""));
      });
    }
    hm.svg.setAttribute("data-step", st.key + ":" + st.layer);
    C.root.setAttribute("data-state", ["ids=" + hashIds(ids()), "pos=" + C.pos, "step=" + C.step,
      "key=" + st.key, "layer=" + st.layer, "sel=" + C.sel,
      "off=" + (api.offList().join(",") || "none")].join(";"));
  }

  function runExperiment(e) {
    if (e.text !== undefined) api.setText(e.text);
    var off = api.allOn();
    (e.off || []).forEach(function (lh) { off[lh[0]][lh[1]] = 0; });
    api.setOff(off);
    if (e.show) api.show(e.show[0], e.show[1]);
    if (e.lens !== undefined && e.lens !== null) { B.pos = e.lens < 0 ? ids().length + e.lens :
      e.lens; B.token = -1; paintLens(); }
    if (e.step !== undefined && e.step !== null) {
      C.pos = ids().length - 1;
      var steps = api.trace(ids(), C.pos).steps;
      for (var k = 0; k < steps.length; k++) if (steps[k].key === e.step[0] &&
        steps[k].layer === e.step[1]) C.step = k;
      paintSteps();
    }
  }
  var lastIds = null;
  function onChange() {
    var now = ids().join(",");
    if (now !== lastIds) { B.pos = -1; C.pos = -1; B.token = -1; C.sel = -1; lastIds = now; }
    paintHeads(); paintLens(); paintSteps();
  }
  /* each panel's width: measured once now, then once per resize (the
     drawings never ask the page) */
  [A, B, C].forEach(function (X) { X.w = K.width(X.root); K.onResize(X.root, function () {
    X.w = K.width(X.root); onChange(); }); });
  api.onChange(onChange);
  onChange();
};

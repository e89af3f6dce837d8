/* attnlib live model, the page: the reader's text through a small GPT (live_model.js, on the shared
   attention engine), its attention, next-token probabilities and generation with the KV cache
   (sampling.js), drawn with the shared DOM kit (kit.js) in the explorer's visual language; the
   laboratory under it is live_lab.js. Every output carries those files before this one. No globals
   of its own, no network, no eval. Every string from the payload or from the reader reaches the
   page through textContent / setAttribute (escaped). */
(function () {
  "use strict";
  /* taken now: a later output on the page (another attnlib's) may define the globals again */
  var K = window.attnlibKit, M = window.attnlibLiveModel, R = window.attnlibSampling,
    wireHeatmap = window.attnlibWireHeatmap;
  var el = K.el, div = K.div, shown = K.shown, quoted = K.quoted;

  function hashIds(ids) { var h = 2166136261; for (var i = 0; i < ids.length; i++) h = Math.imul(h ^
    (ids[i] + 1), 16777619) >>> 0; return h.toString(16); }
  function fix(x, d) { return (Math.abs(x) < 0.5 * Math.pow(10, -d) ? 0 : x).toFixed(d); }

  /* ------------------------------------------------------------------ the page */
  function init(root, P) {
    var uid = K.uid(root), c = P.config, model = M.model(c, M.load(P)), stoi = {};
    P.vocab.forEach(function (ch, i) { stoi[ch] = i; });
    var palette = K.palette(P.palette);
    function colour(v) { return K.colour(palette, v, 0, 1); }
    /* K/V values: the lab's diverging palette (blue below zero, white, red above) */
    var diverging = K.palette(P.paletteDiv);
    function signed(v, m) { return K.colour(diverging, v, -m, m); }

    function encode(text) { /* one token per character (code point), as attnlib.CharTokenizer */
      var ids = [], bad = [];
      Array.from(text).forEach(function (ch) {
        if (Object.prototype.hasOwnProperty.call(stoi, ch)) ids.push(stoi[ch]);
        else if (bad.indexOf(ch) < 0) bad.push(ch);
      });
      return { ids: ids, unknown: bad };
    }
    /* the model's computations with the heads switched off now (off undefined) or with others */
    function heads(off) { return off === undefined ? S.off : off; }
    function run(ids, off) { return model.forward(ids, heads(off)); } /* -> {logits, att, cache} */
    function trace(ids, pos, off) { return model.trace(ids, pos, heads(off)); }
    function greedy(ids, n, off) { return model.greedy(ids, n, heads(off)); }
    function allOn() { var o = []; for (var l = 0; l < c.L; l++) { o.push([]); for (var h = 0;
      h < c.H; h++) o[l].push(1); } return o; }

    var S = { ids: [], nPrompt: 0, logits: [], att: null, cache: null, added: [0, 0], layer: 0,
      head: 0, row: -1, cur: [0, 0], rng: null, steps: 0, sampling: {},
      off: allOn() }, listeners = [];
    function nOff() { var n = 0; S.off.forEach(function (r) { r.forEach(function (v) {
      n += v ? 0 : 1; }); }); return n; }
    function offList() { var o = []; S.off.forEach(function (r, l) { r.forEach(function (v, h) {
      if (!v) o.push("L" + l + "H" + h); }); }); return o; }

    /* ---- static frame ---- */
    div("attnlib-title", root, P.title);
    var inputLab = div("attnlib-live-input", root, undefined, "label");
    div("", inputLab, "Your text (the model reads up to " + c.T + " characters)", "span");
    var input = div("attnlib-live-text", inputLab, undefined, "textarea");
    input.rows = 2; input.spellcheck = false; input.value = P.prompt;
    input.setAttribute("autocomplete", "off");
    var msg = div("attnlib-live-msg", root);
    msg.setAttribute("role", "status"); msg.setAttribute("aria-live", "polite");
    var offNote = div("attnlib-live-msg attnlib-live-offnote", root);

    var controls = div("attnlib-controls", root);
    function range(name, n, onchange) {
      var r = K.slider(controls, name, { max: n - 1, text: function (v) { return String(v);
        }, oninput: onchange });
      if (n < 2) r.parentNode.style.display = "none";
      return r;
    }
    var layerRange = range("layer", c.L, function (v) { S.layer = v; paint(); });
    var headRange = range("head", c.H, function (v) { S.head = v; paint(); });
    var frame = K.matrixFrame(root, controls, function () { selectRow(-1); });
    var clear = frame.clear, figure = frame.figure, bars = frame.bars, tip = frame.tip;

    var gen = div("attnlib-live-gen", root);
    div("attnlib-live-head", gen, "Generate, one token (here one character) at a time");
    var gcontrols = div("attnlib-controls", gen);
    /* the sampling controls refuse, visibly, what the sampler does not take (a temperature above 5,
       a top-k beyond the vocabulary, ...); a temperature of 0 is greedy */
    var refused = div("attnlib-invalid-note", gen); /* why a number typed was refused */
    refused.setAttribute("role", "status"); refused.style.display = "none";
    function number(name, key, min, max, step, whole, hint) {
      return K.numberBox(K.control(gcontrols, name), { cls: "attnlib-live-num", label: name,
        value: P.sampling[key], min: min, max: max, step: step, whole: whole, title: hint,
        note: refused, onvalue: readSampling });
    }
    var tempIn = number("temperature", "temperature", 0, 5, 0.1, false,
      "0 = greedy (always the most likely token)");
    var topkIn = number("top-k", "topK", 0, c.V, 1, true,
      "keep only the k most likely tokens (0 = all)");
    var toppIn = number("top-p", "topP", 0.01, 1, 0.05, false,
      "keep the fewest tokens whose probability sums to p (1 = all)");
    var seedIn = number("seed", "seed", 0, 4294967295, 1, true,
      "the random draws start again from this seed");
    var buttons = div("attnlib-controls", gen);
    var stepBtn = div("attnlib-live-step", buttons, "next token \u25b8", "button");
    var manyBtn = div("attnlib-live-many", buttons, "+16 tokens \u25b8\u25b8", "button");
    var resetBtn = div("attnlib-live-reset", buttons, "reset to your text", "button");
    [stepBtn, manyBtn, resetBtn].forEach(function (b) { b.type = "button"; });
    stepBtn.title = "Sample one token and feed it through the model with the KV cache";
    var outText = div("attnlib-live-out", gen);
    var kv = div("attnlib-live-kv", root);

    function setMessage(lines) {
      msg.textContent = "";
      lines.forEach(function (l) { div("", msg, l); });
      msg.style.display = lines.length ? "block" : "none";
    }
    function readSampling() {
      var s = { temperature: tempIn.get(), topK: topkIn.get(),
        topP: toppIn.get(), seed: seedIn.get() };
      var reseed = S.sampling.seed !== s.seed; S.sampling = s;
      /* a new seed: the draws start again from the text */
      if (reseed && S.cache) { restart(); return; }
      paintBars(); paintState();
    }

    /* ---- model state ---- */
    /* typing: the matrix of the shown head, the probabilities and the text on every key; the cache
       view and the laboratory (heavy: traces, two greedy continuations) once typing pauses */
    var deferred = later(function () { syncFills(); paintKV(); changed(); }, 200);
    /* fn() once typing pauses: run() (re)starts the wait of ms milliseconds, cancel() drops it (the
       caller draws everything itself); data-pending on the output says whether anything waits
       (these parts, or the tokens of a pressed button) */
    function later(fn, ms) {
      var timer = null;
      function set(t) {
        timer = t; root.setAttribute("data-pending", t === null && !queued ? "0" : "1"); }
      return { run: function () { if (timer !== null) clearTimeout(timer);
        set(setTimeout(function () { set(null); fn(); }, ms)); }, cancel: function () {
        if (timer !== null) { clearTimeout(timer); set(null); } } };
    }
    function restart(typing) {
      var enc = encode(input.value), lines = [];
      if (enc.unknown.length) {
        lines.push("Not in the model's vocabulary (it knows only the " + c.V +
          " characters of its training text), left out: " + enc.unknown.map(function (ch) {
          return quoted(ch); }).join(", ") + ".");
      }
      var ids = enc.ids;
      if (ids.length > c.T) {
        lines.push("Your text has " + ids.length + " characters; the model reads at most " + c.T +
          ", so it sees the last " + c.T + ".");
        ids = ids.slice(ids.length - c.T);
      }
      if (!ids.length) lines.push("Type some text: the model needs at least " +
        "one character it knows.");
      setMessage(lines);
      var r = run(ids);
      S.ids = ids.slice(); S.nPrompt = ids.length; S.logits = r.logits;
      S.att = r.att; S.cache = r.cache;
      S.added = [0, ids.length]; S.row = -1; S.cur = [0, 0]; S.steps = 0;
      S.rng = R.mulberry32(S.sampling.seed);
      if (typing) { build(true); deferred.run(); return; }
      deferred.cancel();
      build();
      changed();
    }
    /* heads on or off: the same text (generated tokens included) through the changed model */
    function setOff(off) {
      S.off = off.map(function (r) { return r.slice(); });
      var r = run(S.ids);
      S.logits = r.logits; S.att = r.att; S.cache = r.cache; S.added = [0, S.ids.length];
      S.steps = 0;
      S.rng = R.mulberry32(S.sampling.seed);
      deferred.cancel();
      build();
      changed();
    }
    function changed() {
      var o = offList();
      offNote.textContent = o.length ? "Switched off below (\u201cSwitch heads off\u201d): " +
        o.map(function (x) { return x.replace(/L(\d+)H(\d+)/, "layer $1, head $2"); }).join("; ") +
        ". Every number here is the model without " + (o.length > 1 ? "them" : "it") + "." : "";
      offNote.style.display = o.length ? "block" : "none";
      listeners.forEach(function (f) { f(); });
    }
    function decode(n) {
      for (var s = 0; s < n && S.ids.length < c.T && S.ids.length > 0; s++) {
        var p = R.distribution(S.logits[S.logits.length - 1], S.sampling);
        var id = R.draw(p, S.rng());
        var o = S.cache.step(id); /* ONE token in; each layer appends one K row and one V row */
        S.ids.push(id); S.logits.push(o.logits);
        for (var l = 0; l < c.L; l++) for (var h = 0; h < c.H; h++) S.att[l][h].push(o.att[l][h]);
        S.added = [S.ids.length - 1, S.ids.length]; S.steps++;
      }
      if (S.ids.length >= c.T) setMessage(["The context is full: the model has " + c.T +
        " position vectors, so it cannot go further. Reset or edit the text."]);
      deferred.cancel();
      build();
      changed();
    }
    input.addEventListener("input", function () { restart(true); });
    /* a press paints its answer first (the output marked busy, data-pending=1) and decodes after
       that frame, so the click is seen at once; presses while it waits add their tokens */
    var queued = 0;
    function press(n) {
      if (!queued) {
        root.setAttribute("data-pending", "1"); gen.setAttribute("aria-busy", "true");
        requestAnimationFrame(function () {
          setTimeout(function () {
            var k = queued; queued = 0;
            gen.removeAttribute("aria-busy");
            decode(k);
            root.setAttribute("data-pending", "0");
          }, 0);
        });
      }
      queued += n;
    }
    stepBtn.addEventListener("click", function () { press(1); });
    manyBtn.addEventListener("click", function () { press(16); });
    resetBtn.addEventListener("click", function () { restart(); });

    /* ---- the attention matrix ---- */
    /* the page's width, measured once here and then once per resize (never while typing); the
       drawing's box is the largest any text gives at this width (the cells shrink as the text
       grows), so the probabilities beside or below it stay where they are while the reader types */
    var rootW = root.clientWidth || 640;
    var svg = null, cells = [], fills = [], rowLabels = [], colLabels = [], rowBox = null,
      cursor = null, geo = null;
    /* the weights are painted on a canvas inside the drawing (one bitmap, not thousands of
       restyled shapes: a key repaints only the cells whose colour changed); the cells stay in the
       drawing as hidden rects that carry each one's value (data-value) and colour (fill), in
       row-major order, and the future's hatching is one path over the hatched cells */
    var ctx = null, probe = null, hoverAt = -1;
    /* 3 px at least: 64 characters then fit a phone's column beside the
       colour bar (4 px made 256) */
    function cellFor(T, avail) {
      return Math.max(3, Math.min(30, Math.floor(Math.min(440, avail - 46) / T))); }
    function build(light) {
      tip.hide();
      var T = S.ids.length, toks = S.ids.map(function (id) { return P.vocab[id]; });
      /* the same queries, keys and layout as drawn (typing at the model's full context): new
         labels and weights in the drawing there is, nothing measured, nothing rebuilt */
      if (svg && geo.T === T && geo.w === rootW && geo.nPrompt === S.nPrompt &&
        geo.steps === 0 && S.steps === 0) {
        relabel(toks); paint(light); paintOut(); return;
      }
      figure.textContent = "";
      if (!T) { svg = null; cells = []; fills = []; paintBars(); paintOut();
        if (!light) paintKV(); paintState(); return; }
      /* cells fitted to the page's width (less the colour bar), so the 12 px labels stay 12 px */
      var avail = Math.max(240, rootW) - 70, cell = cellFor(T, avail), most = 0;
      for (var t = 1; t <= c.T; t++) most = Math.max(most, t * cellFor(t, avail));
      var step = Math.max(1, Math.ceil(13 / cell));
      var left = 40, top = 4, colH = 22, W2 = left + most + 6, H2 = top + most + colH + 18;
      geo = { cell: cell, left: left, top: top, T: T, w: rootW, nPrompt: S.nPrompt, steps: S.steps,
        gap: cell >= 14 ? 1 : 0, W: W2 };
      svg = el("svg", { "class": "attnlib-plot", width: W2, height: H2,
        viewBox: "0 0 " + W2 + " " + H2, tabindex: "0", role: "group", focusable: "true",
        "aria-label": "attention weights, " + T + " queries by " + T + " keys. Arrow keys " +
          "move, Enter shows the prediction at that query, Escape clears." }, figure);
      var hatch = K.hatch(svg, "attnlib-hatch-" + uid), gap = cell >= 14 ? 1 : 0;
      var dpr = window.devicePixelRatio || 1, fo = el("foreignObject", { x: 0, y: 0, width: W2,
        height: H2, "aria-hidden": "true" }, svg);
      var canvas = div("attnlib-live-canvas", fo, undefined, "canvas");
      canvas.width = Math.round(W2 * dpr); canvas.height = Math.round(H2 * dpr);
      canvas.style.width = W2 + "px"; canvas.style.height = H2 + "px";
      canvas.style.display = "block";
      ctx = canvas.getContext("2d");
      if (ctx) ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      var grid = el("g", ctx ? { "class": "attnlib-live-cells", display: "none" } :
        { "class": "attnlib-live-cells" }, svg), future = [];
      cells = []; fills = []; rowLabels = []; colLabels = []; hoverAt = -1;
      /* the future stays hatched: paint leaves it */
      for (var i = 0; i < T; i++) for (var j = 0; j < T; j++) {
        cells.push(el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * cell,
          width: cell - gap, height: cell - gap, "data-row": i, "data-col": j }, grid));
        if (j > i) {
          cells[cells.length - 1].setAttribute("fill", hatch);
          cells[cells.length - 1].setAttribute("data-value", "0");
          future.push("M" + (left + j * cell) + " " + (top + i * cell) + "h" + (cell - gap) + "v" +
            (cell - gap) + "h" + (gap - cell) + "z");
        }
      }
      if (future.length) el("path", { "class": "attnlib-live-future", d: future.join(""),
        fill: hatch, "pointer-events": "none" }, svg);
      /* the cell under the pointer (framed) and the anchor of its tooltip */
      probe = el("rect", { "class": "attnlib-live-probe", width: cell - gap, height: cell - gap,
        fill: "none", "stroke-width": "1.5", visibility: "hidden", "pointer-events": "none" }, svg);
      for (i = 0; i < T; i++) {
        var t = el("text", { "class": "attnlib-rowlabel", x: left - 5,
          y: top + i * cell + cell / 2 + 4, "text-anchor": "end", tabindex: "-1", role: "button",
          "data-row": i }, svg, " "); /* the matrix is one tab stop */
        el("title", {}, t);
        if (i % step) t.setAttribute("visibility", "hidden");
        rowLabels.push(t);
      }
      for (j = 0; j < T; j += step) {
        var ct = el("text", { "class": "attnlib-collabel" + (j >= S.nPrompt ?
          " attnlib-live-genlabel" : ""), x: left + j * cell + cell / 2, y: top + T * cell + 13,
          "text-anchor": "middle", "data-col": j }, svg, " ");
        el("title", {}, ct);
        colLabels.push(ct);
      }
      el("text", { "class": "attnlib-axis", x: left + T * cell / 2, y: top + T * cell + colH + 16,
        "text-anchor": "middle" }, svg, "key");
      el("text", { "class": "attnlib-axis", x: 9, y: top + T * cell / 2, "text-anchor": "middle",
        transform: "rotate(-90 9 " + (top + T * cell / 2) + ")" }, svg, "query");
      if (S.steps > 0) { /* the query row this decode step computed */
        el("rect", { "class": "attnlib-live-newrow", x: left - 1, y: top + (T - 1) * cell - 1,
          width: T * cell + 2 - gap, height: cell + 2 - gap, fill: "none", stroke: "#e66100",
          "stroke-width": "2", "stroke-dasharray": "4 2",
          "pointer-events": "none" }, svg);
      }
      rowBox = el("rect", { "class": "attnlib-rowbox", x: left - 1.5, width: T * cell + 2 - gap,
        height: cell + 2 - gap, fill: "none", stroke: "#000", "stroke-width": "3", visibility:
        "hidden", "pointer-events": "none" }, svg);
      cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: cell - gap,
        fill: "none", stroke: "#e66100", "stroke-width": "2", "stroke-dasharray": "3 2", visibility:
        "hidden", "pointer-events": "none" }, svg);
      K.colourbar(figure, palette, 0, 1, Math.max(110, Math.min(240, most)),
        "weight", "attnlib-grad-" + uid);
      svg.addEventListener("mousemove", function (e) {
        var n = e.target === canvas ? cellAt(e) : -1;
        if (n === hoverAt) return;
        hoverAt = n;
        if (n < 0) { probe.setAttribute("visibility", "hidden"); tip.hide(); return; }
        probe.setAttribute("visibility", "visible");
        showTip(n);
      });
      svg.addEventListener("mouseleave", function () { hoverAt = -1;
        probe.setAttribute("visibility", "hidden"); });
      svg.addEventListener("click", function (e) { var n = e.target === canvas ? cellAt(e) : -1;
        if (n >= 0) selectRow(Math.floor(n / geo.T)); });
      wireHeatmap({ svg: svg, cells: cells, cursor: cursor, rowLabels: rowLabels, rows: T, cols: T,
        cur: function () { return S.cur; }, selectRow: selectRow,
          showTip: showTip, hideTip: tip.hide });
      relabel(toks);
      paint(light);
      paintOut();
    }
    /* the tokens on the axes: each label's text, its title and its accessible name */
    function relabel(toks) {
      rowLabels.forEach(function (t, i) {
        var isNew = i >= S.added[0] && i < S.added[1] && S.steps > 0, gen = i >= S.nPrompt;
        t.firstChild.textContent = shown(toks[i], 4);
        t.setAttribute("aria-label", "query " + i + ": " + toks[i]);
        t.lastChild.textContent = "query " + i + ": " + quoted(toks[i]) + (gen ? " (generated)" :
          "") + (isNew ? " (new)" : "");
      });
      colLabels.forEach(function (ct) {
        var j = +ct.getAttribute("data-col");
        ct.firstChild.textContent = shown(toks[j], 3);
        ct.lastChild.textContent = "key " + j + ": " + quoted(toks[j]);
      });
    }
    function weight(i, j) { return j <= i ? S.att[S.layer][S.head][i][j] : 0; }
    /* the weights of the shown head (the past only: the future is hatched once, in build), the row
       highlight, the probabilities; and, unless typing (light), the cache view */
    function paint(light) {
      if (!svg) { paintState(); return; }
      var T = geo.T, A = S.att[S.layer][S.head], byColour = {};
      for (var i = 0; i < T; i++) for (var j = 0, row = A[i]; j <= i; j++) {
        /* only the colours that changed are painted again (most weights stay in the first bin) */
        var n = i * T + j, v = row[j], f = colour(v);
        if (fills[n] !== f) { fills[n] = f; (byColour[f] = byColour[f] || []).push(n); }
        cells[n].setAttribute("data-value", v.toFixed(6));
      }
      rowLabels.forEach(function (t, i) {
        var k = "attnlib-rowlabel" + (i >= S.nPrompt ? " attnlib-live-genlabel" : "") +
          (i === S.row ? " attnlib-selected" : "");
        if (t._cls !== k) { t._cls = k; t.setAttribute("class", k); }
      });
      /* the changed cells on the canvas, colour by colour (one fill style per colour, not per
         cell) */
      if (ctx) for (var col in byColour) {
        ctx.fillStyle = col;
        byColour[col].forEach(function (n) { ctx.fillRect(geo.left + (n % T) * geo.cell,
          geo.top + Math.floor(n / T) * geo.cell, geo.cell - geo.gap, geo.cell - geo.gap); });
      }
      if (light !== true || !ctx) syncFills();
      rowBox.setAttribute("y", geo.top + Math.max(0, S.row) * geo.cell - 1.5);
      rowBox.setAttribute("visibility", S.row >= 0 ? "visible" : "hidden");
      clear.disabled = S.row < 0;
      if (tip.cell >= 0) showTip(tip.cell);
      paintBars(); if (light !== true) paintKV(); paintState();
    }
    /* the hidden cells' fill attributes, set to the colours painted: at once, except while the
       reader types (a fill set restyles its cell, even hidden: thousands a key), then once typing
       pauses (the deferred parts) */
    function syncFills() {
      for (var n = 0; n < fills.length; n++) if (fills[n] !== undefined && cells[n]._fill !==
        fills[n]) { cells[n]._fill = fills[n]; cells[n].setAttribute("fill", fills[n]); }
    }
    function paintState() {
      stepBtn.disabled = manyBtn.disabled = !S.ids.length || S.ids.length >= c.T;
      resetBtn.disabled = S.steps === 0;
      var s = S.sampling;
      root.setAttribute("data-state", ["ids=" + hashIds(S.ids), "n=" + S.ids.length,
        "generated=" + (S.ids.length - S.nPrompt), "layer=" + S.layer, "head=" + S.head,
        "row=" + S.row, "temperature=" + s.temperature, "top_k=" + s.topK,
        "top_p=" + s.topP, "seed=" + s.seed, "off=" + (offList().join(",") || "none")].join(";"));
    }

    /* ---- next-token probabilities ---- */
    /* drawn once, then updated in place: a key changes the numbers, not the elements (only what
       changed is set, so the page restyles only that) */
    var barEls = null;
    function put(node, key, value, how) {
      if (node["_" + key] === value) return;
      node["_" + key] = value;
      if (how === "text") node.textContent = value;
      else if (how === "style") node.style[key] = value;
      else if (key === "className") node.className = value;
      else if (key === "title") node.title = value;
      else node.setAttribute(key, value);
    }
    function paintBars() {
      if (!S.ids.length) { barEls = null; bars.textContent = ""; div("attnlib-hint", bars,
        "Type some text to see what the model predicts."); return; }
      var pos = S.row >= 0 ? S.row : S.ids.length - 1, z = S.logits[pos];
      var raw = R.softmax(z), p = R.distribution(z, S.sampling), s = S.sampling;
      var order = []; for (var i = 0; i < c.V; i++) order.push(i);
      order.sort(function (a, b) { return raw[b] - raw[a] || a - b; });
      var top = order.slice(0, 10);
      if (!barEls) {
        bars.textContent = "";
        barEls = { head: div("attnlib-bars-head", bars), settings: div("attnlib-live-settings",
          bars), rows: [], note: null };
        barEls.head.title = "The bars are the distribution sampling draws from at these " +
          "settings (cut: left out by top-k or top-p); hover a bar's number for the model's " +
          "own probability (temperature 1, no cut).";
        top.forEach(function () {
          var row = div("attnlib-bar", bars), tok = div("attnlib-bar-token", row),
            fill = div("attnlib-bar-fill", div("attnlib-bar-track", row));
          barEls.rows.push({ row: row, tok: tok, fill: fill, val: div("attnlib-bar-value", row) });
        });
      }
      put(barEls.head, "text", "next character after " + quoted(P.vocab[S.ids[pos]]) +
        " (position " + pos + ", counted from 0)", "text");
      put(barEls.settings, "text", s.temperature > 0 ? "temperature " + s.temperature + (s.topK ?
        ", top-k " + s.topK : "") + (s.topP < 1 ? ", top-p " + s.topP : "") :
        "temperature 0: greedy", "text");
      var actual = pos + 1 < S.ids.length ? S.ids[pos + 1] : -1;
      top.forEach(function (id, k) {
        var e = barEls.rows[k];
        put(e.row, "className", "attnlib-bar" + (p[id] === 0 ? " attnlib-live-cut" : "") +
          (id === actual ? " attnlib-live-actual" : ""));
        put(e.row, "data-token", String(id));
        put(e.row, "data-p", p[id].toFixed(6));
        put(e.tok, "text", shown(P.vocab[id], 8), "text");
        put(e.tok, "title", quoted(P.vocab[id]) + (id === actual ?
          ": what the text says next" : ""));
        put(e.fill, "width", (100 * p[id]).toFixed(1) + "%", "style");
        put(e.fill, "background", colour(p[id]), "style");
        put(e.val, "text", p[id] === 0 ? "cut" : p[id].toFixed(3), "text");
        put(e.val, "title", "model probability " + raw[id].toFixed(4));
      });
      if (actual >= 0) {
        if (!barEls.note) barEls.note = div("attnlib-live-note", bars);
        put(barEls.note, "text", "The text continues with " + quoted(P.vocab[actual]) +
          " (framed if in the top 10).", "text");
      } else if (barEls.note) { bars.removeChild(barEls.note); barEls.note = null; }
    }

    /* ---- the text so far ---- */
    function paintOut() {
      outText.textContent = "";
      div("attnlib-live-label", outText, "Text so far (" + S.ids.length + " of " +
        c.T + " tokens): ", "span");
      /* the reader's text in one span (one node to lay out while typing), each
         generated token in its own */
      var ch = function (id) { return P.vocab[id] === "\n" ? "\u23ce" : P.vocab[id]; };
      if (S.nPrompt) div("", outText, S.ids.slice(0, S.nPrompt).map(ch).join(""), "span");
      for (var i = S.nPrompt; i < S.ids.length; i++)
        div("attnlib-live-gentok" + (S.steps > 0 && i === S.ids.length - 1 ?
          " attnlib-live-newtok" : ""), outText, ch(S.ids[i]), "span");
      outText.setAttribute("data-ids", S.ids.join(","));
      outText.setAttribute("data-prompt-len", String(S.nPrompt));
    }

    /* ---- the KV cache of the shown layer and head ---- */
    function paintKV() {
      kv.textContent = "";
      var T = S.ids.length, D = c.C / c.H;
      if (!T) return;
      var a = S.added[0], b = S.added[1];
      div("attnlib-live-head", kv, "KV cache: layer " + S.layer + ", head " + S.head);
      div("attnlib-live-note", kv, S.steps === 0
        ? "Prefill: your " + T + " tokens went through the model together; every layer stored " +
          T + " key rows and " + T + " value rows (" + c.H + " heads \u00d7 " + D +
          " numbers each). All are new (outlined)."
        : "Decode step " + S.steps + ": only the new token " + quoted(P.vocab[S.ids[T - 1]]) +
          " went through the model; every layer appended one key row and one " +
          "value row (outlined, row " +
          a + ") and its query attended over all " + T + " rows. The cache now holds " + T +
            " tokens: 2 \u00d7 " + c.L + " layers \u00d7 " + T + " \u00d7 " + c.C + " numbers.");
      var Kc = S.cache.K[S.layer], Vc = S.cache.V[S.layer], m = 1e-9, i, j;
      var off = S.head * S.cache.cap * D; /* the cache is head by head: (H, capacity, D) */
      for (i = 0; i < T; i++) for (j = 0; j < D; j++) m = Math.max(m, Math.abs(Kc[off + i * D + j]),
        Math.abs(Vc[off + i * D + j]));
      var wrap = div("attnlib-live-kvwrap", kv);
      [["keys K", Kc], ["values V", Vc]].forEach(function (kvp) {
        var box = div("attnlib-live-kvbox", wrap);
        div("attnlib-live-label", box, kvp[0] + " (" + T + " \u00d7 " + D + ")");
        /* rows at least 4 px; a 10 px token label on every row that has room for one, else on
           every `every`-th row, right-aligned clear of the outline of the new rows */
        var ch = Math.max(4, Math.min(14, Math.floor(280 / T))), cw = 10, left = 38, fs = 10;
        var every = Math.ceil((fs + 1) / ch);
        var s = el("svg", { "class": "attnlib-live-kvplot", width: left + D * cw + 4,
          height: T * ch + 4, role: "img", "aria-label": kvp[0] + " rows of layer " + S.layer +
          ", head " + S.head + "; rows " + a + " to " + (b - 1) + " are new" }, box);
        for (i = 0; i < T; i++) {
          for (j = 0; j < D; j++) {
            var v = kvp[1][off + i * D + j];
            el("rect", { "class": "attnlib-live-kvcell", x: left + j * cw, y: 2 + i * ch,
              width: cw - 1, height: ch - (ch > 5 ? 1 : 0), fill: signed(v, m), "data-row": i,
              "data-col": j, "data-kv": v.toFixed(4) }, s);
          }
          if (i % every === 0) el("text", { "class": "attnlib-live-kvlabel", x: left - 7,
            y: 2 + i * ch + ch / 2 + fs * 0.35, "text-anchor": "end", "font-size": fs }, s,
            shown(P.vocab[S.ids[i]], 3));
        }
        el("rect", { "class": "attnlib-live-kvnew", x: left - 2, y: 1 + a * ch, width: D * cw + 2,
          height: (b - a) * ch + 1, fill: "none", stroke: "#e66100", "stroke-width": "2",
          "pointer-events": "none" }, s);
        s.addEventListener("mouseover", function (e) {
          var r = e.target.getAttribute && e.target.getAttribute("data-kv");
          if (r === null || r === undefined) return;
          var ii = +e.target.getAttribute("data-row"), jj = +e.target.getAttribute("data-col");
          tip.show(e.target, [kvp[0].split(" ")[0] + " of token " + ii + " " +
            quoted(P.vocab[S.ids[ii]]) + ", dim " + jj, "value = " + r], box);
        });
        s.addEventListener("mouseleave", tip.hide);
      });
    }

    /* ---- tooltip, row selection, keyboard ---- */
    function showTip(n) {
      var T = geo.T, i = Math.floor(n / T), j = n % T;
      probe.setAttribute("x", geo.left + j * geo.cell);
      probe.setAttribute("y", geo.top + i * geo.cell);
      tip.show(probe, ["query " + quoted(P.vocab[S.ids[i]]) + " (" + i + ") \u2192 key " +
        quoted(P.vocab[S.ids[j]]) + " (" + j + ")",
        "weight = " + (j > i ? "0 (masked: the future)" : fix(weight(i, j), 4)),
        "layer " + S.layer + " \u00b7 head " + S.head], figure, n);
    }
    function selectRow(i) { S.row = i; paint(true); }
    /* the cell (row-major index) under a pointer event on the drawing, -1 outside the matrix; the
       drawing may be scaled down (max-width), so the event's position is read in its own units */
    function cellAt(e) {
      var b = svg.getBoundingClientRect(), u = b.width ? geo.W / b.width : 1;
      var j = Math.floor(((e.clientX - b.left) * u - geo.left) / geo.cell),
        i = Math.floor(((e.clientY - b.top) * u - geo.top) / geo.cell);
      return i >= 0 && j >= 0 && i < geo.T && j < geo.T ? i * geo.T + j : -1;
    }
    K.keepKeys(root, function (t) { if (t !== input) selectRow(-1); });

    /* for the tests and the curious: the same functions the page uses */
    root.attnlibLive = {
      encode: function (text) { return encode(text); },
      forward: function (ids, off) {
        var r = run(ids, off || allOn());
        return { logits: r.logits.map(function (a) { return Array.from(a); }),
          attentions: r.att.map(function (l) { return l.map(function (h) {
            return h.map(function (row) { return Array.from(row); }); }); }) };
      },
      timeForward: function (ids, reps) {
        var best = Infinity;
        for (var k = 0; k < (reps || 5); k++) { var t0 = performance.now(); run(ids);
          best = Math.min(best, performance.now() - t0); }
        return best;
      },
      cacheRows: function () { return S.cache ? S.cache.n : 0; },
      /* the laboratory's computations, for the tests: off[l][h] = 0 switches a head off */
      lens: function (ids, pos, off) { return trace(ids, pos, off || allOn()).lens.map(
        function (z) { return Array.from(R.softmax(z)); }); },
      trace: function (ids, pos, off) {
        return trace(ids, pos, off || allOn()).steps.map(function (st) {
          var o = { key: st.key, layer: st.layer, fn: st.fn };
          if (st.rows) o.rows = st.rows.map(function (r) { return [r[0], Array.from(r[1])]; });
          if (st.weights) o.weights = st.weights.map(function (r) { return Array.from(r); });
          if (st.logits) o.logits = Array.from(st.logits);
          return o;
        });
      },
      greedy: function (ids, n, off) { return greedy(ids, n, off || allOn()); },
      distribution: function (z, s) { return Array.from(R.distribution(Float64Array.from(z), s)); }
    };
    /* what the laboratory panels (live_lab.js) read and set */
    var api = { P: P, c: c, root: root, uid: uid, palette: palette, encode: encode, trace: trace,
      greedy: greedy, softmax: R.softmax, argmax: R.argmax, allOn: allOn, state: function () {
      return S; }, setOff: setOff, offList: offList, nOff: nOff,
      onChange: function (f) { listeners.push(f); },
      setText: function (text) { input.value = text; restart(); },
      show: function (layer, head) { S.layer = layer; S.head = head; layerRange.show(layer);
        headRange.show(head); paint(); } };
    readSampling();
    restart();
    if (P.lab && window.attnlibLiveLab) window.attnlibLiveLab(api);
    K.onResize(root, function () { rootW = root.clientWidth || 640; build(); });
  }

  K.boot(document.currentScript, "attnlib-live", init, "live model");
})();

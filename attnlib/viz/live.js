/* attnlib live model: a small GPT's forward pass, KV cache and sampling in plain JavaScript, drawn
   in the explorer's visual language. No globals, no network, no eval. Every string from the payload
   or from the reader reaches the page through textContent / setAttribute (escaped). */
(function () {
  "use strict";
  var SVGNS = (function () { var t = document.createElement("div"); t.innerHTML = "<svg></svg>"; return t.firstChild.namespaceURI; })();
  var CHAR_W = 7;

  /* ------------------------------------------------------------------ DOM helpers (as explorer.js) */
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
    return width && s.length > width ? s.slice(0, width - 1) + "\u2026" : s;
  }
  function quoted(tok) { return "\u201c" + shown(tok) + "\u201d"; }

  /* ------------------------------------------------------------------ weights */
  function half(h) { /* IEEE 754 binary16 bits -> number */
    var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  function loadWeights(P) {
    var bin = atob(P.blob), bytes = new Uint8Array(bin.length), W = {};
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var dv = new DataView(bytes.buffer);
    P.tensors.forEach(function (t) {
      var n = t.shape.reduce(function (a, b) { return a * b; }, 1), a = new Float64Array(n), j;
      if (t.dtype === "f32") for (j = 0; j < n; j++) a[j] = dv.getFloat32(t.offset + 4 * j, true);
      else for (j = 0; j < n; j++) a[j] = half(dv.getUint16(t.offset + 2 * j, true));
      W[t.name] = a;
    });
    return W;
  }

  /* ------------------------------------------------------------------ the forward pass */
  function erf(x) {
    /* erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)): positive terms, no
       cancellation, double precision; |x| >= 6 is +-1 to double precision */
    var ax = Math.abs(x);
    if (ax >= 6) return x > 0 ? 1 : -1;
    var x2 = ax * ax, term = ax, sum = ax;
    for (var n = 1; n < 300; n++) { term *= 2 * x2 / (2 * n + 1); sum += term; if (term < 1e-17 * sum) break; }
    var r = 1.1283791670955126 * Math.exp(-x2) * sum;
    return x < 0 ? -r : r;
  }
  var ACT = {
    gelu: function (x) { return 0.5 * x * (1 + erf(x * Math.SQRT1_2)); },
    gelu_tanh: function (x) { return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); },
    relu: function (x) { return x > 0 ? x : 0; }
  };
  var E = window.attnlibEngine;
  function linear(w, b, x, nOut, nIn) { return E.linear(x, w, b, 1, nIn, nOut); } /* nn.Linear on one row */
  function layerNorm(x, w, b, eps) {
    var n = x.length, mean = 0, v = 0, i, y = new Float64Array(n);
    for (i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (i = 0; i < n; i++) v += (x[i] - mean) * (x[i] - mean);
    var inv = 1 / Math.sqrt(v / n + eps);
    for (i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * w[i] + b[i];
    return y;
  }

  /* A KV cache plus the model: step(id) runs ONE token through every layer, appending its key and
     value rows to each layer's cache and attending over every row held (the attention itself is the
     shared engine's, as in every explorer). Feeding a prompt token by token is exactly the causal
     forward pass (prefill); feeding sampled tokens is decoding. off[l][h] = 0 switches head h of
     layer l off: its output is zeroed before out_proj (the ablation a forward hook does in PyTorch).
     With trace, step also returns every intermediate vector of this token, named after the attnlib
     module that computes it, and the residual stream after the embedding and after each layer. */
  function Runner(W, c, off) {
    this.W = W; this.c = c; this.D = c.C / c.H; this.n = 0; this.off = off || null;
    this.K = []; this.V = [];
    for (var l = 0; l < c.L; l++) { this.K.push(new Float64Array(c.T * c.C)); this.V.push(new Float64Array(c.T * c.C)); }
  }
  Runner.prototype.step = function (id, trace) {
    var W = this.W, c = this.c, C = c.C, H = c.H, D = this.D, t = this.n, act = ACT[c.act];
    if (t >= c.T) throw new Error("the context is full (" + c.T + " tokens)");
    var x = new Float64Array(C), i, hh, steps = trace ? [] : null, resid = [];
    for (i = 0; i < C; i++) x[i] = W.tok[id * C + i] + (W.pos ? W.pos[t * C + i] : 0);
    function rec(s) { if (steps) steps.push(s); }
    rec({ key: "embed", layer: -1, fn: "GPT.embed (Embeddings): tok_emb[token] + pos_emb[position]", rows: [["x", Float64Array.from(x)]] });
    resid.push(Float64Array.from(x));
    var att = [];
    for (var l = 0; l < c.L; l++) {
      var p = "l" + l + ".", L1 = "layer " + (l + 1) + ": ";
      var h = x;
      if (c.normFirst) { h = layerNorm(x, W[p + "n1.w"], W[p + "n1.b"], c.eps); rec({ key: "norm1", layer: l, fn: L1 + "DecoderLayer.norm1 (LayerNorm)", rows: [["norm1(x)", h]] }); }
      var q = linear(W[p + "q.w"], W[p + "q.b"], h, C, C), k = linear(W[p + "k.w"], W[p + "k.b"], h, C, C), v = linear(W[p + "v.w"], W[p + "v.b"], h, C, C);
      rec({ key: "qkv", layer: l, fn: L1 + "MultiHeadAttention.q_proj, k_proj, v_proj (Linear), split into " + H + " heads of " + D, rows: [["q", q], ["k", k], ["v", v]], heads: H });
      /* the cache is head by head, (H, T, D): the new token's row of each head goes into its slot */
      for (hh = 0; hh < H; hh++) {
        this.K[l].set(k.subarray(hh * D, (hh + 1) * D), (hh * c.T + t) * D);
        this.V[l].set(v.subarray(hh * D, (hh + 1) * D), (hh * c.T + t) * D);
      }
      var r = E.attendHeadsCached(q, this.K[l], this.V[l], 1, t + 1, c.T, H, H, D, { headMask: this.off ? this.off[l] : null });
      var rows = [];
      for (hh = 0; hh < H; hh++) rows.push(r.weights.slice(hh * (t + 1), (hh + 1) * (t + 1)));
      att.push(rows);
      rec({ key: "weights", layer: l, fn: L1 + "attnlib.scaled_dot_product_attention, per head, over the " + (t + 1) + " cached keys", weights: rows,
        off: this.off ? this.off[l].slice() : null });
      var a = linear(W[p + "o.w"], W[p + "o.b"], r.merged, C, C);
      rec({ key: "out", layer: l, fn: L1 + "MultiHeadAttention.merge_heads, then out_proj (Linear)", rows: [["merged heads", r.merged], ["out_proj", a]] });
      for (i = 0; i < C; i++) x[i] += a[i];
      if (!c.normFirst) { x = layerNorm(x, W[p + "n1.w"], W[p + "n1.b"], c.eps); rec({ key: "add1", layer: l, fn: L1 + "residual x + attention, then DecoderLayer.norm1 (post-norm)", rows: [["x", Float64Array.from(x)]] }); }
      else rec({ key: "add1", layer: l, fn: L1 + "residual: x + attention", rows: [["x", Float64Array.from(x)]] });
      var u = c.normFirst ? layerNorm(x, W[p + "n3.w"], W[p + "n3.b"], c.eps) : x;
      if (c.normFirst) rec({ key: "norm3", layer: l, fn: L1 + "DecoderLayer.norm3 (LayerNorm)", rows: [["norm3(x)", u]] });
      var f = linear(W[p + "f1.w"], W[p + "f1.b"], u, c.F, C);
      for (i = 0; i < c.F; i++) f[i] = act(f[i]);
      rec({ key: "ffn1", layer: l, fn: L1 + "FeedForward.fc1 (Linear), then " + c.act.toUpperCase(), rows: [[c.act + "(fc1)", f]] });
      var g = linear(W[p + "f2.w"], W[p + "f2.b"], f, C, c.F);
      for (i = 0; i < C; i++) x[i] += g[i];
      if (!c.normFirst) x = layerNorm(x, W[p + "n3.w"], W[p + "n3.b"], c.eps);
      rec({ key: "ffn2", layer: l, fn: L1 + "FeedForward.fc2 (Linear), residual x + FFN" + (c.normFirst ? "" : ", then DecoderLayer.norm3 (post-norm)"),
        rows: [["fc2", g], ["x", Float64Array.from(x)]] });
      resid.push(Float64Array.from(x));
    }
    var xf = x;
    if (c.normFirst) { xf = layerNorm(x, W["nf.w"], W["nf.b"], c.eps); rec({ key: "normf", layer: c.L, fn: "GPT.norm_f (LayerNorm)", rows: [["norm_f(x)", xf]] }); }
    this.n = t + 1;
    var logits = linear(W.head || W.tok, null, xf, c.V, C);
    rec({ key: "logits", layer: c.L, fn: "GPT.lm_head (Linear" + (W.head ? "" : ", tied to tok_emb") + "), then softmax", logits: logits });
    return { logits: logits, att: att, steps: steps, resid: resid }; /* att[layer][head]: (t + 1,) */
  };
  /* the logit lens: the final norm and the LM head applied to the residual stream after the
     embedding and after every layer (a post-norm stream is already normalised) */
  function lensOf(W, c, resid) {
    return resid.map(function (x) {
      var xf = c.normFirst ? layerNorm(x, W["nf.w"], W["nf.b"], c.eps) : x;
      return linear(W.head || W.tok, null, xf, c.V, c.C);
    });
  }

  /* ------------------------------------------------------------------ sampling */
  function mulberry32(seed) { /* a small seeded PRNG: the same seed gives the same draws everywhere */
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  function softmax(z) {
    var m = -Infinity, s = 0, i, p = new Float64Array(z.length);
    for (i = 0; i < z.length; i++) if (z[i] > m) m = z[i];
    for (i = 0; i < z.length; i++) { p[i] = z[i] === -Infinity ? 0 : Math.exp(z[i] - m); s += p[i]; }
    for (i = 0; i < z.length; i++) p[i] /= s;
    return p;
  }
  function argmax(z) { var b = 0; for (var i = 1; i < z.length; i++) if (z[i] > z[b]) b = i; return b; }
  /* the distribution a sampler draws from: softmax(z / temperature), only the top_k largest logits
     (ties kept, as attnlib.sample_next), then the smallest set of tokens whose probability sums to
     >= top_p; temperature 0 is greedy (all mass on the argmax) */
  function distribution(z, s) {
    var V = z.length, i, p;
    if (!(s.temperature > 0)) { p = new Float64Array(V); p[argmax(z)] = 1; return p; }
    var y = new Float64Array(V);
    for (i = 0; i < V; i++) y[i] = z[i] / s.temperature;
    if (s.topK > 0 && s.topK < V) {
      var kth = Array.prototype.slice.call(y).sort(function (a, b) { return b - a; })[s.topK - 1];
      for (i = 0; i < V; i++) if (y[i] < kth) y[i] = -Infinity;
    }
    p = softmax(y);
    if (s.topP < 1) {
      var order = []; for (i = 0; i < V; i++) order.push(i);
      order.sort(function (a, b) { return p[b] - p[a] || a - b; });
      var cum = 0, keep = 0;
      while (keep < V && cum < s.topP) { cum += p[order[keep]]; keep++; }
      for (i = keep; i < V; i++) p[order[i]] = 0;
      for (i = 0; i < V; i++) p[i] /= cum;
    }
    return p;
  }
  function draw(p, u) {
    var acc = 0, last = 0;
    for (var i = 0; i < p.length; i++) { if (p[i] > 0) { acc += p[i]; last = i; if (u < acc) return i; } }
    return last;
  }

  function hashIds(ids) { var h = 2166136261; for (var i = 0; i < ids.length; i++) h = Math.imul(h ^ (ids[i] + 1), 16777619) >>> 0; return h.toString(16); }
  function fix(x, d) { return (Math.abs(x) < 0.5 * Math.pow(10, -d) ? 0 : x).toFixed(d); }

  /* ------------------------------------------------------------------ the page */
  function init(root) {
    root.setAttribute("data-attnlib-ready", "1");
    var P = JSON.parse(root.querySelector("script.attnlib-live-data").textContent);
    var ns = root.querySelector(".attnlib-noscript");
    if (ns) ns.parentNode.removeChild(ns);
    window.__attnlibExplorerCount = (window.__attnlibExplorerCount || 0) + 1;
    var uid = (root.getAttribute("data-attnlib-uid") || "x") + "-" + window.__attnlibExplorerCount;
    var c = P.config, W = loadWeights(P), stoi = {};
    P.vocab.forEach(function (ch, i) { stoi[ch] = i; });
    var palette = [];
    for (var i = 0; i < 256; i++) palette.push("#" + P.palette.substr(6 * i, 6));
    function colour(v) { return palette[Math.max(0, Math.min(255, Math.floor(v * 256)))]; }
    function signed(v, m) { /* K/V values: blue (negative) - white - orange (positive), colour-blind safe */
      var t = Math.max(-1, Math.min(1, v / m)), a = Math.abs(t);
      var r = t < 0 ? 255 - a * (255 - 33) : 255 - a * (255 - 230), g = t < 0 ? 255 - a * (255 - 102) : 255 - a * (255 - 97),
        b = t < 0 ? 255 - a * (255 - 172) : 255 - a * (255 - 1);
      return "rgb(" + Math.round(r) + "," + Math.round(g) + "," + Math.round(b) + ")";
    }

    function encode(text) { /* one token per character (code point), as attnlib.CharTokenizer */
      var ids = [], bad = [];
      Array.from(text).forEach(function (ch) {
        if (Object.prototype.hasOwnProperty.call(stoi, ch)) ids.push(stoi[ch]);
        else if (bad.indexOf(ch) < 0) bad.push(ch);
      });
      return { ids: ids, unknown: bad };
    }
    function run(ids, off) { /* a full causal forward pass on a fresh cache (used by the page and the tests) */
      var r = new Runner(W, c, off === undefined ? S.off : off), logits = [], att = [];
      for (var l = 0; l < c.L; l++) { att.push([]); for (var h = 0; h < c.H; h++) att[l].push([]); }
      ids.forEach(function (id) {
        var o = r.step(id);
        logits.push(o.logits);
        for (var l = 0; l < c.L; l++) for (var h = 0; h < c.H; h++) att[l][h].push(o.att[l][h]);
      });
      return { runner: r, logits: logits, att: att };
    }
    function allOn() { var o = []; for (var l = 0; l < c.L; l++) { o.push([]); for (var h = 0; h < c.H; h++) o[l].push(1); } return o; }
    /* one token (position pos of ids) through the whole network, every intermediate recorded */
    function trace(ids, pos, off) {
      var r = new Runner(W, c, off === undefined ? S.off : off);
      for (var t = 0; t < pos; t++) r.step(ids[t]);
      var o = r.step(ids[pos], true);
      return { steps: o.steps, resid: o.resid, lens: lensOf(W, c, o.resid), logits: o.logits };
    }
    /* the greedy continuation of ids: n tokens, each the most likely next one */
    function greedy(ids, n, off) {
      var r = new Runner(W, c, off === undefined ? S.off : off), z = null, out = [];
      ids.forEach(function (id) { z = r.step(id).logits; });
      for (var k = 0; k < n && ids.length + k < c.T && z; k++) { var id = argmax(z); out.push(id); if (ids.length + k + 1 < c.T) z = r.step(id).logits; }
      return out;
    }

    var S = { ids: [], nPrompt: 0, logits: [], att: null, runner: null, added: [0, 0], layer: 0, head: 0,
      row: -1, cur: [0, 0], rng: null, steps: 0, sampling: {}, off: allOn() }, listeners = [];
    function nOff() { var n = 0; S.off.forEach(function (r) { r.forEach(function (v) { n += v ? 0 : 1; }); }); return n; }
    function offList() { var o = []; S.off.forEach(function (r, l) { r.forEach(function (v, h) { if (!v) o.push("L" + (l + 1) + "H" + (h + 1)); }); }); return o; }

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
      var lab = div("attnlib-control", controls, undefined, "label");
      div("", lab, name, "span");
      var r = div("", lab, undefined, "input");
      r.type = "range"; r.min = "0"; r.max = String(n - 1); r.step = "1"; r.value = "0";
      r.setAttribute("aria-label", name);
      var out = div("", lab, "1", "output");
      r.addEventListener("input", function () { out.textContent = String(+r.value + 1); r.setAttribute("aria-valuetext", name + " " + (+r.value + 1)); onchange(+r.value); });
      if (n < 2) lab.style.display = "none";
      return r;
    }
    var layerRange = range("layer", c.L, function (v) { S.layer = v; paint(); });
    var headRange = range("head", c.H, function (v) { S.head = v; paint(); });
    var clear = div("attnlib-clear", controls, "clear row", "button");
    clear.type = "button"; clear.title = "Clear the highlighted query row (Esc)";
    clear.addEventListener("click", function () { selectRow(-1); });

    var body = div("attnlib-body", root);
    var figure = div("attnlib-figure", body);
    var bars = div("attnlib-bars", body);
    var tip = div("attnlib-tooltip", root);
    tip.setAttribute("role", "status");

    var gen = div("attnlib-live-gen", root);
    div("attnlib-live-head", gen, "Generate, one token at a time");
    var gcontrols = div("attnlib-controls", gen);
    function number(name, value, min, max, step, hint) {
      var lab = div("attnlib-control", gcontrols, undefined, "label");
      div("", lab, name, "span");
      var n = div("attnlib-live-num", lab, undefined, "input");
      n.type = "number"; n.min = String(min); n.max = String(max); n.step = String(step); n.value = String(value);
      n.title = hint;
      n.addEventListener("change", readSampling);
      n.addEventListener("input", readSampling);
      return n;
    }
    var tempIn = number("temperature", P.sampling.temperature, 0, 5, 0.1, "0 = greedy (always the most likely token)");
    var topkIn = number("top-k", P.sampling.topK, 0, c.V, 1, "keep only the k most likely tokens (0 = all)");
    var toppIn = number("top-p", P.sampling.topP, 0.01, 1, 0.05, "keep the fewest tokens whose probability sums to p (1 = all)");
    var seedIn = number("seed", P.sampling.seed, 0, 4294967295, 1, "the random draws start again from this seed");
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
      var t = parseFloat(tempIn.value), k = parseInt(topkIn.value, 10), p = parseFloat(toppIn.value), sd = parseInt(seedIn.value, 10);
      var s = { temperature: isFinite(t) && t > 0 ? t : 0, topK: isFinite(k) && k > 0 ? Math.min(k, c.V) : 0,
        topP: isFinite(p) && p > 0 && p < 1 ? p : 1, seed: isFinite(sd) && sd >= 0 ? sd >>> 0 : 0 };
      var reseed = S.sampling.seed !== s.seed;
      S.sampling = s;
      if (reseed && S.runner) { restart(); return; } /* a new seed: the draws start again from the text */
      paintBars(); paintState();
    }

    /* ---- model state ---- */
    function restart() {
      var enc = encode(input.value), lines = [];
      if (enc.unknown.length) {
        lines.push("Not in the model's vocabulary (it knows only the " + c.V + " characters of its training text), left out: " +
          enc.unknown.map(function (ch) { return quoted(ch); }).join(", ") + ".");
      }
      var ids = enc.ids;
      if (ids.length > c.T) {
        lines.push("Your text has " + ids.length + " characters; the model reads at most " + c.T + ", so it sees the last " + c.T + ".");
        ids = ids.slice(ids.length - c.T);
      }
      if (!ids.length) lines.push("Type some text: the model needs at least one character it knows.");
      setMessage(lines);
      var r = run(ids);
      S.ids = ids.slice(); S.nPrompt = ids.length; S.logits = r.logits; S.att = r.att; S.runner = r.runner;
      S.added = [0, ids.length]; S.row = -1; S.cur = [0, 0]; S.steps = 0;
      S.rng = mulberry32(S.sampling.seed);
      build();
      changed();
    }
    /* heads switched on or off: the same text (generated tokens included) through the changed model */
    function setOff(off) {
      S.off = off.map(function (r) { return r.slice(); });
      var r = run(S.ids);
      S.logits = r.logits; S.att = r.att; S.runner = r.runner; S.added = [0, S.ids.length]; S.steps = 0;
      S.rng = mulberry32(S.sampling.seed);
      build();
      changed();
    }
    function changed() {
      var o = offList();
      offNote.textContent = o.length ? "Switched off below (\u201cSwitch heads off\u201d): " + o.join(", ") +
        ". Every number here is the model without " + (o.length > 1 ? "them" : "it") + "." : "";
      offNote.style.display = o.length ? "block" : "none";
      listeners.forEach(function (f) { f(); });
    }
    function decode(n) {
      for (var s = 0; s < n && S.ids.length < c.T && S.ids.length > 0; s++) {
        var p = distribution(S.logits[S.logits.length - 1], S.sampling);
        var id = draw(p, S.rng());
        var o = S.runner.step(id); /* ONE token in; each layer appends one K row and one V row */
        S.ids.push(id); S.logits.push(o.logits);
        for (var l = 0; l < c.L; l++) for (var h = 0; h < c.H; h++) S.att[l][h].push(o.att[l][h]);
        S.added = [S.ids.length - 1, S.ids.length]; S.steps++;
      }
      if (S.ids.length >= c.T) setMessage(["The context is full: the model has " + c.T + " position vectors, so it cannot go further. Reset or edit the text."]);
      build();
      changed();
    }
    input.addEventListener("input", restart);
    stepBtn.addEventListener("click", function () { decode(1); });
    manyBtn.addEventListener("click", function () { decode(16); });
    resetBtn.addEventListener("click", function () { restart(); });

    /* ---- the attention matrix ---- */
    var svg = null, cbar = null, cells = [], rowLabels = [], rowBox = null, cursor = null, geo = null;
    function build() {
      hideTip();
      figure.textContent = "";
      var T = S.ids.length;
      if (!T) { svg = null; cells = []; paintBars(); paintOut(); paintKV(); paintState(); return; }
      var toks = S.ids.map(function (id) { return P.vocab[id]; });
      /* cells fitted to the page's width (less the colour bar), so the 12 px labels stay 12 px */
      var avail = Math.max(240, root.clientWidth || 640) - 70;
      var cell = Math.max(4, Math.min(30, Math.floor(Math.min(440, avail - 46) / T)));
      var step = Math.max(1, Math.ceil(13 / cell));
      var left = 40, top = 4, colH = 22, W2 = left + T * cell + 6, H2 = top + T * cell + colH + 18;
      geo = { cell: cell, left: left, top: top, T: T };
      svg = el("svg", { "class": "attnlib-plot", width: W2, height: H2, viewBox: "0 0 " + W2 + " " + H2, tabindex: "0",
        role: "group", focusable: "true", "aria-label": "attention weights, " + T + " queries by " + T +
          " keys. Arrow keys move, Enter shows the prediction at that query, Escape clears." }, figure);
      var pat = el("pattern", { id: "attnlib-hatch-" + uid, width: "6", height: "6", patternUnits: "userSpaceOnUse",
        patternTransform: "rotate(45)" }, el("defs", {}, svg));
      el("rect", { "class": "attnlib-hatch-bg", width: "6", height: "6", fill: "#eeeeee" }, pat);
      el("line", { "class": "attnlib-hatch-fg", x1: "0", y1: "0", x2: "0", y2: "6", stroke: "#b0b0b0", "stroke-width": "2" }, pat);
      var grid = el("g", {}, svg), gap = cell >= 14 ? 1 : 0;
      cells = []; rowLabels = [];
      for (var i = 0; i < T; i++) for (var j = 0; j < T; j++) {
        cells.push(el("rect", { "class": "attnlib-cell", x: left + j * cell, y: top + i * cell, width: cell - gap,
          height: cell - gap, "data-row": i, "data-col": j }, grid));
      }
      for (i = 0; i < T; i++) {
        var isNew = i >= S.added[0] && i < S.added[1] && S.steps > 0, gen = i >= S.nPrompt;
        var t = el("text", { "class": "attnlib-rowlabel" + (gen ? " attnlib-live-genlabel" : ""), x: left - 5,
          y: top + i * cell + cell / 2 + 4, "text-anchor": "end", tabindex: "0", role: "button", "data-row": i,
          "aria-label": "query " + i + ": " + toks[i] }, svg, shown(toks[i], 4));
        el("title", {}, t, "query " + i + ": " + quoted(toks[i]) + (gen ? " (generated)" : "") + (isNew ? " (new)" : ""));
        if (i % step) t.setAttribute("visibility", "hidden");
        rowLabels.push(t);
      }
      for (j = 0; j < T; j += step) {
        var x = left + j * cell + cell / 2;
        var ct = el("text", { "class": "attnlib-collabel" + (j >= S.nPrompt ? " attnlib-live-genlabel" : ""), x: x,
          y: top + T * cell + 13, "text-anchor": "middle" }, svg, shown(toks[j], 3));
        el("title", {}, ct, "key " + j + ": " + quoted(toks[j]));
      }
      el("text", { "class": "attnlib-axis", x: left + T * cell / 2, y: H2 - 2, "text-anchor": "middle" }, svg, "key");
      el("text", { "class": "attnlib-axis", x: 9, y: top + T * cell / 2, "text-anchor": "middle",
        transform: "rotate(-90 9 " + (top + T * cell / 2) + ")" }, svg, "query");
      if (S.steps > 0) { /* the query row this decode step computed */
        el("rect", { "class": "attnlib-live-newrow", x: left - 1, y: top + (T - 1) * cell - 1, width: T * cell + 2 - gap,
          height: cell + 2 - gap, fill: "none", stroke: "#e66100", "stroke-width": "2", "stroke-dasharray": "4 2",
          "pointer-events": "none" }, svg);
      }
      rowBox = el("rect", { "class": "attnlib-rowbox", x: left - 1.5, width: T * cell + 2 - gap, height: cell + 2 - gap,
        fill: "none", stroke: "#000", "stroke-width": "3", visibility: "hidden", "pointer-events": "none" }, svg);
      cursor = el("rect", { "class": "attnlib-cursor", width: cell - gap, height: cell - gap, fill: "none", stroke: "#e66100",
        "stroke-width": "2", "stroke-dasharray": "3 2", visibility: "hidden", "pointer-events": "none" }, svg);
      buildColourbar(Math.max(110, Math.min(240, T * cell)));
      wire();
      paint();
      paintOut();
    }
    function buildColourbar(h) {
      var gid = "attnlib-grad-" + uid, w = 14, x0 = 6, y0 = 4;
      cbar = el("svg", { "class": "attnlib-colorbar", width: 64, height: h + 12, "aria-hidden": "true" }, figure);
      var g = el("linearGradient", { id: gid, x1: "0", y1: "1", x2: "0", y2: "0" }, el("defs", {}, cbar));
      for (var s = 0; s <= 32; s++) el("stop", { offset: (s / 32).toFixed(4), "stop-color": palette[Math.min(255, s * 8)] }, g);
      el("rect", { x: x0, y: y0, width: w, height: h, fill: "url(#" + gid + ")", stroke: "#888", "stroke-width": "0.5" }, cbar);
      [0, 0.5, 1].forEach(function (v, i) {
        var y = y0 + h - (h * i) / 2;
        el("line", { x1: x0 + w, x2: x0 + w + 4, y1: y, y2: y, stroke: "currentColor" }, cbar);
        el("text", { x: x0 + w + 6, y: y + 4, "font-size": "11" }, cbar, String(v));
      });
      var lx = x0 + w + 38, ly = y0 + h / 2;
      el("text", { "class": "attnlib-axis", x: lx, y: ly, "text-anchor": "middle", transform: "rotate(-90 " + lx + " " + ly + ")" }, cbar, "weight");
    }
    function weight(i, j) { return j <= i ? S.att[S.layer][S.head][i][j] : 0; }
    function paint() {
      if (!svg) { paintState(); return; }
      var T = geo.T, hatch = "url(#attnlib-hatch-" + uid + ")";
      for (var n = 0; n < cells.length; n++) {
        var i = Math.floor(n / T), j = n % T, v = weight(i, j);
        cells[n].setAttribute("fill", j > i ? hatch : colour(v));
        cells[n].setAttribute("data-value", j > i ? "0" : v.toFixed(6));
      }
      rowLabels.forEach(function (t, i) { t.setAttribute("class", "attnlib-rowlabel" + (i >= S.nPrompt ? " attnlib-live-genlabel" : "") + (i === S.row ? " attnlib-selected" : "")); });
      rowBox.setAttribute("y", geo.top + Math.max(0, S.row) * geo.cell - 1.5);
      rowBox.setAttribute("visibility", S.row >= 0 ? "visible" : "hidden");
      clear.disabled = S.row < 0;
      if (tip.style.display === "block" && tip._cell !== undefined) showTip(tip._cell);
      paintBars(); paintKV(); paintState();
    }
    function paintState() {
      stepBtn.disabled = manyBtn.disabled = !S.ids.length || S.ids.length >= c.T;
      resetBtn.disabled = S.steps === 0;
      var s = S.sampling;
      root.setAttribute("data-state", ["ids=" + hashIds(S.ids), "n=" + S.ids.length, "generated=" + (S.ids.length - S.nPrompt),
        "layer=" + S.layer, "head=" + S.head, "row=" + S.row, "temperature=" + s.temperature, "top_k=" + s.topK,
        "top_p=" + s.topP, "seed=" + s.seed, "off=" + (offList().join(",") || "none")].join(";"));
    }

    /* ---- next-token probabilities ---- */
    function paintBars() {
      bars.textContent = "";
      if (!S.ids.length) { div("attnlib-hint", bars, "Type some text to see what the model predicts."); return; }
      var pos = S.row >= 0 ? S.row : S.ids.length - 1, z = S.logits[pos];
      var raw = softmax(z), p = distribution(z, S.sampling), s = S.sampling;
      var order = []; for (var i = 0; i < c.V; i++) order.push(i);
      order.sort(function (a, b) { return raw[b] - raw[a] || a - b; });
      var head = div("attnlib-bars-head", bars, "next character after " + quoted(P.vocab[S.ids[pos]]) + " (position " + pos + ")");
      head.title = "The bars are the distribution sampling draws from at these settings; the number in brackets is the model's own probability (temperature 1, no cut).";
      div("attnlib-live-settings", bars, s.temperature > 0 ? "temperature " + s.temperature + (s.topK ? ", top-k " + s.topK : "") +
        (s.topP < 1 ? ", top-p " + s.topP : "") : "temperature 0: greedy");
      var actual = pos + 1 < S.ids.length ? S.ids[pos + 1] : -1;
      order.slice(0, 10).forEach(function (id) {
        var row = div("attnlib-bar" + (p[id] === 0 ? " attnlib-live-cut" : "") + (id === actual ? " attnlib-live-actual" : ""), bars);
        row.setAttribute("data-token", String(id));
        row.setAttribute("data-p", p[id].toFixed(6));
        var tok = div("attnlib-bar-token", row, shown(P.vocab[id], 8));
        tok.title = quoted(P.vocab[id]) + (id === actual ? ": what the text says next" : "");
        var f = div("attnlib-bar-fill", div("attnlib-bar-track", row));
        f.style.width = (100 * p[id]).toFixed(1) + "%";
        f.style.background = colour(p[id]);
        var val = div("attnlib-bar-value", row, p[id] === 0 ? "cut" : p[id].toFixed(3));
        val.title = "model probability " + raw[id].toFixed(4);
      });
      if (actual >= 0) div("attnlib-live-note", bars, "The text continues with " + quoted(P.vocab[actual]) + " (framed if in the top 10).");
    }

    /* ---- the text so far ---- */
    function paintOut() {
      outText.textContent = "";
      div("attnlib-live-label", outText, "Text so far (" + S.ids.length + " of " + c.T + " tokens): ", "span");
      S.ids.forEach(function (id, i) {
        var sp = div(i >= S.nPrompt ? "attnlib-live-gentok" + (S.steps > 0 && i === S.ids.length - 1 ? " attnlib-live-newtok" : "") : "", outText, P.vocab[id], "span");
        if (P.vocab[id] === "\n") sp.textContent = "\u23ce";
      });
      outText.setAttribute("data-ids", S.ids.join(","));
      outText.setAttribute("data-prompt-len", String(S.nPrompt));
    }

    /* ---- the KV cache of the shown layer and head ---- */
    function paintKV() {
      kv.textContent = "";
      var T = S.ids.length, D = c.C / c.H;
      if (!T) return;
      var a = S.added[0], b = S.added[1];
      div("attnlib-live-head", kv, "KV cache: layer " + (S.layer + 1) + ", head " + (S.head + 1));
      div("attnlib-live-note", kv, S.steps === 0
        ? "Prefill: your " + T + " tokens went through the model together; every layer stored " + T + " key rows and " + T +
          " value rows (" + c.H + " heads \u00d7 " + D + " numbers each). All are new (outlined)."
        : "Decode step " + S.steps + ": only the new token " + quoted(P.vocab[S.ids[T - 1]]) + " went through the model; every layer appended one key row and one value row (outlined, row " +
          a + ") and its query attended over all " + T + " rows. The cache now holds " + T + " tokens: 2 \u00d7 " + c.L + " layers \u00d7 " + T + " \u00d7 " + c.C + " numbers.");
      var K = S.runner.K[S.layer], V = S.runner.V[S.layer], off = S.head * D, m = 1e-9, i, j;
      off = S.head * c.T * D; /* the cache is head by head: (H, T, D) */
      for (i = 0; i < T; i++) for (j = 0; j < D; j++) m = Math.max(m, Math.abs(K[off + i * D + j]), Math.abs(V[off + i * D + j]));
      var wrap = div("attnlib-live-kvwrap", kv);
      [["keys K", K], ["values V", V]].forEach(function (kvp) {
        var box = div("attnlib-live-kvbox", wrap);
        div("attnlib-live-label", box, kvp[0] + " (" + T + " \u00d7 " + D + ")");
        // rows at least 4 px; a 10 px token label on every row that has room for one, else on
        // every `every`-th row, right-aligned clear of the outline of the new rows
        var ch = Math.max(4, Math.min(14, Math.floor(280 / T))), cw = 10, left = 38, fs = 10;
        var every = Math.ceil((fs + 1) / ch);
        var s = el("svg", { "class": "attnlib-live-kvplot", width: left + D * cw + 4, height: T * ch + 4, role: "img",
          "aria-label": kvp[0] + " rows of layer " + (S.layer + 1) + ", head " + (S.head + 1) + "; rows " + a + " to " + (b - 1) + " are new" }, box);
        for (i = 0; i < T; i++) {
          for (j = 0; j < D; j++) {
            var v = kvp[1][off + i * D + j];
            el("rect", { "class": "attnlib-live-kvcell", x: left + j * cw, y: 2 + i * ch, width: cw - 1, height: ch - (ch > 5 ? 1 : 0),
              fill: signed(v, m), "data-row": i, "data-col": j, "data-kv": v.toFixed(4) }, s);
          }
          if (i % every === 0) el("text", { "class": "attnlib-live-kvlabel", x: left - 7, y: 2 + i * ch + ch / 2 + fs * 0.35,
            "text-anchor": "end", "font-size": fs }, s, shown(P.vocab[S.ids[i]], 3));
        }
        el("rect", { "class": "attnlib-live-kvnew", x: left - 2, y: 1 + a * ch, width: D * cw + 2, height: (b - a) * ch + 1, fill: "none",
          stroke: "#e66100", "stroke-width": "2", "pointer-events": "none" }, s);
        s.addEventListener("mouseover", function (e) {
          var r = e.target.getAttribute && e.target.getAttribute("data-kv");
          if (r === null || r === undefined) return;
          var ii = +e.target.getAttribute("data-row"), jj = +e.target.getAttribute("data-col");
          placeTip(e.target, [kvp[0].split(" ")[0] + " of token " + ii + " " + quoted(P.vocab[S.ids[ii]]) + ", dim " + jj, "value = " + r]);
        });
        s.addEventListener("mouseleave", hideTip);
      });
    }

    /* ---- tooltip, row selection, keyboard ---- */
    function placeTip(target, lines) {
      tip._cell = undefined;
      tip.textContent = "";
      div("attnlib-tip-tokens", tip, lines[0]);
      var line = div("attnlib-tip-value", tip, "");
      div("attnlib-value", line, lines[1], "b");
      if (lines[2]) div("attnlib-tip-where", tip, lines[2]);
      tip.style.display = "block";
      /* beside the target, never above the drawing it belongs to: the text box, the sliders and the
         title stay readable */
      var rb = root.getBoundingClientRect(), cb = target.getBoundingClientRect();
      var home = target.closest ? target.closest(".attnlib-figure, .attnlib-live-kvbox") : null;
      var floor = home ? home.getBoundingClientRect().top - rb.top : 0;
      var x = cb.right - rb.left + 8, y = cb.top - rb.top - tip.offsetHeight - 6;
      if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, cb.left - rb.left - tip.offsetWidth - 8);
      if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, root.clientWidth - tip.offsetWidth);
      if (y < floor) y = cb.bottom - rb.top + 6;
      tip.style.left = x + "px"; tip.style.top = y + "px";
    }
    function showTip(n) {
      var T = geo.T, i = Math.floor(n / T), j = n % T;
      placeTip(cells[n], ["query " + quoted(P.vocab[S.ids[i]]) + " (" + i + ") \u2192 key " + quoted(P.vocab[S.ids[j]]) + " (" + j + ")",
        "weight = " + (j > i ? "0 (masked: the future)" : fix(weight(i, j), 4)), "layer " + (S.layer + 1) + " \u00b7 head " + (S.head + 1)]);
      tip._cell = n;
    }
    function hideTip() { tip.style.display = "none"; tip._cell = undefined; }
    function selectRow(i) { S.row = i; paint(); }
    function moveCursor(i, j) {
      S.cur = [Math.max(0, Math.min(geo.T - 1, i)), Math.max(0, Math.min(geo.T - 1, j))];
      var cl = cells[S.cur[0] * geo.T + S.cur[1]];
      cursor.setAttribute("x", cl.getAttribute("x")); cursor.setAttribute("y", cl.getAttribute("y"));
      cursor.setAttribute("visibility", "visible");
      showTip(S.cur[0] * geo.T + S.cur[1]);
    }
    function wire() {
      window.attnlibWireHeatmap({ svg: svg, cursor: cursor, rowLabels: rowLabels, rows: geo.T, cols: geo.T,
        cur: function () { return S.cur; }, moveCursor: moveCursor, selectRow: selectRow,
        showTip: showTip, hideTip: hideTip });
    }
    window.attnlibKeepKeys(root, function (t) { return t !== input; }, function () { selectRow(-1); });

    /* for the tests and the curious: the same functions the page uses */
    root.attnlibLive = {
      encode: function (text) { return encode(text); },
      forward: function (ids, off) {
        var r = run(ids, off || allOn());
        return { logits: r.logits.map(function (a) { return Array.from(a); }),
          attentions: r.att.map(function (l) { return l.map(function (h) { return h.map(function (row) { return Array.from(row); }); }); }) };
      },
      timeForward: function (ids, reps) {
        var best = Infinity;
        for (var k = 0; k < (reps || 5); k++) { var t0 = performance.now(); run(ids); best = Math.min(best, performance.now() - t0); }
        return best;
      },
      cacheRows: function () { return S.runner ? S.runner.n : 0; },
      /* the laboratory's computations, for the tests: off[l][h] = 0 switches a head off */
      lens: function (ids, pos, off) { return trace(ids, pos, off || allOn()).lens.map(function (z) { return Array.from(softmax(z)); }); },
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
      distribution: function (z, s) { return Array.from(distribution(Float64Array.from(z), s)); }
    };
    /* what the laboratory panels (live_lab.js) read and set */
    var api = { P: P, c: c, root: root, uid: uid, palette: palette, encode: encode, trace: trace, greedy: greedy, softmax: softmax,
      argmax: argmax, allOn: allOn, state: function () { return S; }, setOff: setOff, offList: offList, nOff: nOff,
      onChange: function (f) { listeners.push(f); },
      setText: function (text) { input.value = text; restart(); },
      show: function (layer, head) { S.layer = layer; S.head = head; layerRange.value = String(layer); headRange.value = String(head);
        layerRange.dispatchEvent(new Event("input")); headRange.dispatchEvent(new Event("input")); } };
    readSampling();
    restart();
    if (P.lab && window.attnlibLiveLab) window.attnlibLiveLab(api);
    if (typeof ResizeObserver !== "undefined") {
      var lastW = root.clientWidth, pending = false;
      new ResizeObserver(function () {
        if (pending) return;
        pending = true;
        requestAnimationFrame(function () { pending = false; if (Math.abs(root.clientWidth - lastW) > 8) { lastW = root.clientWidth; build(); } });
      }).observe(root);
    }
  }

  var me = document.currentScript, uid = null;
  if (me && me.parentNode && me.parentNode.getAttribute) uid = me.parentNode.getAttribute("data-attnlib-uid");
  var sel = "div.attnlib-live:not([data-attnlib-ready])" + (uid ? '[data-attnlib-uid="' + uid + '"]' : "");
  var roots = Array.prototype.slice.call(document.querySelectorAll(sel));
  if (uid && !me.parentNode.hasAttribute("data-attnlib-ready") && roots.indexOf(me.parentNode) < 0) roots.push(me.parentNode);
  for (var r = 0; r < roots.length; r++) {
    try { init(roots[r]); } catch (err) { if (window.console) console.error("attnlib live model:", err); }
  }
})();

/* attnlib's live model in the page: a small GPT's forward pass with its KV cache, in plain
   JavaScript (float64), on the shared attention engine (window.attnlibEngine, engine.js; greedy
   decoding takes sampling.js's argmax). No DOM, no network; defines window.attnlibLiveModel once
   (every live output carries this file).

   The interface, one model in, numbers out (the page, live.js, and its laboratory, live_lab.js,
   use nothing else):
     var W = attnlibLiveModel.load(payload);  named weights: Float64Arrays, nn.Linear's (out, in)
     var m = attnlibLiveModel.model(config, W);
       config: {L layers, H heads, C width, F hidden width of the FFN, V vocabulary, T positions,
                act: "gelu" | "gelu_tanh" | "relu", normFirst (pre-norm), eps (LayerNorm)}
     m.forward(ids, off) -> {logits: [(V,) per position], att: att[layer][head][i] = (i + 1,)
                             weights of query i, cache: the filled KV cache}
     m.cache(off)        -> an empty KV cache; cache.step(id) -> {logits, att} feeds one token;
                            cache.K[l], cache.V[l]: (H, T, D) per layer, cache.n rows filled
     m.trace(ids, pos, off) -> every intermediate vector of position pos (the laboratory)
     m.greedy(ids, n, off)  -> the n most likely next tokens, one at a time with the cache
   off[l][h] = 0 switches head h of layer l off (null: every head on).
   A model with other layers (RoPE, RMSNorm, SwiGLU, grouped-query heads, quantized weights) is a
   second config of this interface, its attention on the same engine. */
window.attnlibLiveModel = window.attnlibLiveModel || (function () {
  "use strict";
  var E = window.attnlibEngine, argmax = window.attnlibSampling.argmax;

  /* ------------------------------------------------------------------ weights */
  function half(h) { /* IEEE 754 binary16 bits -> number */
    var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  /* the payload's tensors: float32 or float16, little-endian, in one base64 blob -> {name: Float64Array} */
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
  function Cache(W, c, off) {
    this.W = W; this.c = c; this.D = c.C / c.H; this.n = 0; this.off = off || null;
    this.K = []; this.V = [];
    for (var l = 0; l < c.L; l++) { this.K.push(new Float64Array(c.T * c.C)); this.V.push(new Float64Array(c.T * c.C)); }
  }
  Cache.prototype.step = function (id, trace) {
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

  /* ------------------------------------------------------------------ the model */
  function model(c, W) {
    function cache(off) { return new Cache(W, c, off || null); }
    /* a full causal forward pass on a fresh cache: the prompt token by token (prefill) */
    function forward(ids, off) {
      var r = cache(off), logits = [], att = [], l, h;
      for (l = 0; l < c.L; l++) { att.push([]); for (h = 0; h < c.H; h++) att[l].push([]); }
      ids.forEach(function (id) {
        var o = r.step(id);
        logits.push(o.logits);
        for (l = 0; l < c.L; l++) for (h = 0; h < c.H; h++) att[l][h].push(o.att[l][h]);
      });
      return { logits: logits, att: att, cache: r };
    }
    /* one token (position pos of ids) through the whole network, every intermediate recorded, and
       the logit lens of its residual stream */
    function trace(ids, pos, off) {
      var r = cache(off);
      for (var t = 0; t < pos; t++) r.step(ids[t]);
      var o = r.step(ids[pos], true);
      return { steps: o.steps, resid: o.resid, lens: lensOf(W, c, o.resid), logits: o.logits };
    }
    /* the greedy continuation of ids: n tokens, each the most likely next one (the first of equal
       maxima, as torch.argmax) */
    function greedy(ids, n, off) {
      var r = cache(off), z = null, out = [];
      ids.forEach(function (id) { z = r.step(id).logits; });
      for (var k = 0; k < n && ids.length + k < c.T && z; k++) {
        var id = argmax(z);
        out.push(id);
        if (ids.length + k + 1 < c.T) z = r.step(id).logits;
      }
      return out;
    }
    return { config: c, cache: cache, forward: forward, trace: trace, greedy: greedy };
  }
  return { load: loadWeights, model: model };
})();

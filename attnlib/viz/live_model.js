/* attnlib's live model in the page: a decoder's forward pass with its KV cache, in plain JavaScript
   (float64 arithmetic), on the shared attention engine (window.attnlibEngine, engine.js), with the
   products of weights.js (float numbers or GGUF blocks) and sampling.js's argmax. No DOM, no
   network; defines window.attnlibLiveModel once (every live output carries this file). One runner
   for both models of the book: the tiny GPT of chapter 10 (the Playground) and SmolLM2-135M
   (chapter 16's model, its lab), as attnlib's TransformerConfig describes them.

   The interface, one model in, numbers out (the pages use nothing else):
     var W = attnlibLiveModel.load(payload);  named weights: Float64Arrays, nn.Linear's (out, in)
     var m = attnlibLiveModel.model(config, W);
       config: {L layers, H query heads, G key/value heads (default H: multi-head; fewer: grouped-
                query), C width, D head width (default C / H), F hidden width of the FFN,
                V vocabulary, T positions,
                act: "gelu" | "gelu_tanh" | "relu" | "swiglu" (silu(gate(x)) * fc1(x)),
                norm: "layernorm" | "rmsnorm", eps, normFirst (pre-norm),
                pos: "learned" (a table W.pos, sinusoidal ones too) | "rope" | "none", ropeBase,
                kv: "f64" | "f32" (the cache's numbers; attnlib's cache holds float32)}
       W: {tok, pos, "l<i>.n1.w" / ".b", q, k, v, o, n3, f1, gate, f2 (".w", ".b"), "nf.w" / ".b",
           head (absent: tied to tok)}; a matrix is a Float64Array or a weights.js matrix.
     m.forward(ids, off, o) -> {logits: [(V,) per position], att: att[layer][head][i] = (i + 1,)
                                weights of query i, cache, resid}; o {last: only the last logits,
                                noAtt: no weights kept, resid: the residual stream kept}
     m.cache(off)        -> an empty KV cache; cache.feed(ids, o) runs ids (one or many tokens)
                            through every layer at once; cache.step(id, trace) feeds one token
     m.trace(ids, pos, off) -> every intermediate vector of position pos (the laboratory)
     m.lens(rows, n)     -> the final norm and the LM head on n residual vectors (the logit lens)
     m.greedy(ids, n, off)  -> the n most likely next tokens, one at a time with the cache
   off[l][h] = 0 switches query head h of layer l off (null: every head on). */
window.attnlibLiveModel = window.attnlibLiveModel || (function () {
  "use strict";
  var E = window.attnlibEngine, Wt = window.attnlibWeights, argmax = window.attnlibSampling.argmax;

  /* ------------------------------------------------------------------ weights */
  /* the payload's tensors: float32 or float16, little-endian, in one base64 blob
     -> {name: Float64Array} */
  function loadWeights(P) {
    var bin = atob(P.blob), bytes = new Uint8Array(bin.length), W = {};
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var dv = new DataView(bytes.buffer);
    P.tensors.forEach(function (t) {
      var n = t.shape.reduce(function (a, b) { return a * b; }, 1), a = new Float64Array(n), j;
      if (t.dtype === "f32") for (j = 0; j < n; j++) a[j] = dv.getFloat32(t.offset + 4 * j, true);
      else for (j = 0; j < n; j++) a[j] = Wt.half(dv.getUint16(t.offset + 2 * j, true));
      W[t.name] = a;
    });
    return W;
  }

  /* ------------------------------------------------------------------ the layers' arithmetic */
  function erf(x) {
    /* erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)): positive terms, no
       cancellation, double precision; |x| >= 6 is +-1 to double precision */
    var ax = Math.abs(x);
    if (ax >= 6) return x > 0 ? 1 : -1;
    var x2 = ax * ax, term = ax, sum = ax;
    for (var n = 1; n < 300; n++) { term *= 2 * x2 / (2 * n + 1); sum += term;
      if (term < 1e-17 * sum) break; }
    var r = 1.1283791670955126 * Math.exp(-x2) * sum;
    return x < 0 ? -r : r;
  }
  var ACT = {
    gelu: function (x) { return 0.5 * x * (1 + erf(x * Math.SQRT1_2)); },
    gelu_tanh: function (x) { return 0.5 * x * (1 + Math.tanh(0.7978845608028654 *
      (x + 0.044715 * x * x * x))); },
    relu: function (x) { return x > 0 ? x : 0; },
    swiglu: function (x) { return x / (1 + Math.exp(-x)); } /* silu, on the gate */
  };
  var NORM_NAME = { layernorm: "LayerNorm", rmsnorm: "RMSNorm" };
  /* each of the T rows of X (T, n) normalised: LayerNorm (centre, scale, bias) or RMSNorm
     (x / sqrt(mean(x^2) + eps) * w) */
  function norm(X, T, n, w, b, eps, kind) {
    var Y = new Float64Array(T * n), i, t;
    for (t = 0; t < T; t++) {
      var o = t * n, mean = 0, v = 0;
      if (kind === "layernorm") { for (i = 0; i < n; i++) mean += X[o + i]; mean /= n; }
      for (i = 0; i < n; i++) v += (X[o + i] - mean) * (X[o + i] - mean);
      var inv = 1 / Math.sqrt(v / n + eps);
      for (i = 0; i < n; i++) Y[o + i] = (X[o + i] - mean) * inv * w[i] + (b ? b[i] : 0);
    }
    return Y;
  }
  /* nn.Linear on the T rows of X: the matrix's product (weights.js), then the bias */
  function linear(m, b, X, T) {
    var Y = m.mul(X, T), n = m.rows;
    if (b) for (var t = 0; t < T; t++) for (var o = 0; o < n; o++) Y[t * n + o] += b[o];
    return Y;
  }
  /* RoPE (attnlib.RotaryEmbedding, rotate-half): pair (x[i], x[i + D/2]) of each of the n heads of
     row t turns by the angle (t0 + t) * theta_i, theta_i = base^(-2i/D). The angles in float32, as
     attnlib computes them, so the two agree to float32's rounding of cos and sin. */
  function rope(X, T, n, D, t0, base) {
    var half = D / 2, f = Math.fround, inv = [];
    for (var i = 0; i < half; i++) inv.push(f(Math.pow(base, f(-2 * i / D))));
    for (var t = 0; t < T; t++) {
      for (i = 0; i < half; i++) {
        var a = f((t0 + t) * inv[i]), c = Math.cos(a), s = Math.sin(a);
        for (var h = 0; h < n; h++) {
          var p = t * n * D + h * D + i, x1 = X[p], x2 = X[p + half];
          X[p] = x1 * c - x2 * s; X[p + half] = x2 * c + x1 * s;
        }
      }
    }
  }
  function rowOf(X, t, n) { return X.slice(t * n, (t + 1) * n); }

  /* The config completed with its defaults, and the weights as matrices (a Float64Array becomes a
     dense matrix; a weights.js matrix is used as it is). */
  function prepare(c0, W) {
    var c = {}, k;
    for (k in c0) if (Object.prototype.hasOwnProperty.call(c0, k)) c[k] = c0[k];
    c.G = c.G || c.H; c.D = c.D || c.C / c.H; c.norm = c.norm || "layernorm";
    c.pos = c.pos || (W.pos ? "learned" : "none"); c.kv = c.kv || "f64";
    if (c.H % c.G) throw new Error("n_heads=" + c.H + " must be divisible by n_kv_heads=" + c.G);
    if (!ACT[c.act]) throw new Error("unknown activation " + c.act + "; one of " +
      Object.keys(ACT).join(", "));
    function mat(w, rows, cols) { return !w ? null : w.mul ? w : Wt.dense(w, rows, cols); }
    var C = c.C, HD = c.H * c.D, GD = c.G * c.D, M = { layers: [] };
    M.tok = mat(W.tok, c.V, C);
    M.head = W.head ? mat(W.head, c.V, C) : M.tok;
    for (var l = 0; l < c.L; l++) {
      var p = "l" + l + ".", y = {};
      y.q = mat(W[p + "q.w"], HD, C); y.k = mat(W[p + "k.w"], GD, C);
      y.v = mat(W[p + "v.w"], GD, C);
      y.o = mat(W[p + "o.w"], C, HD); y.f1 = mat(W[p + "f1.w"], c.F, C);
      y.f2 = mat(W[p + "f2.w"], C, c.F);
      y.gate = mat(W[p + "gate.w"], c.F, C);
      ["n1", "q", "k", "v", "o", "n3", "f1", "gate", "f2"].forEach(function (s) {
        y[s + "b"] = W[p + s + ".b"] || null; });
      y.n1w = W[p + "n1.w"]; y.n3w = W[p + "n3.w"];
      M.layers.push(y);
    }
    M.nfw = W["nf.w"] || null; M.nfb = W["nf.b"] || null; M.pos = W.pos || null;
    return { c: c, M: M };
  }

  /* A KV cache plus the model. feed(ids) runs a chunk of tokens through every layer at once: each
     layer appends their key and value rows to its cache and their queries attend, causally, over
     every row held (the attention itself is the shared engine's, as in every explorer). A prompt
     fed at once is the causal forward pass (prefill); one token at a time is decoding. off[l][h] =
     0 switches query head h of layer l off: its output is zeroed before out_proj (the ablation
     attnlib.heads_off does with a hook). The cache grows as it fills, up to T positions. */
  function Cache(m, off) {
    var c = m.c;
    this.m = m; this.n = 0; this.off = off || null; this.cap = 0; this.K = []; this.V = [];
    for (var l = 0; l < c.L; l++) { this.K.push(null); this.V.push(null); }
  }
  Cache.prototype.grow = function (need) {
    var c = this.m.c, cap = Math.min(c.T, Math.max(need, 2 * this.cap, 16)), D = c.D, G = c.G;
    for (var l = 0; l < c.L; l++) {
      [this.K, this.V].forEach(function (A) {
        var old = A[l], a = c.kv === "f32" ? new Float32Array(G * cap * D) :
          new Float64Array(G * cap * D);
        if (old) for (var g = 0; g < G; g++) a.set(old.subarray(g * this.cap * D,
          (g * this.cap + this.n) * D), g * cap * D);
        A[l] = a;
      }, this);
    }
    this.cap = cap;
  };
  /* the bytes the keys and values of the tokens held take (attnlib's KVCache.nbytes, in this
     cache's number type) */
  Cache.prototype.nbytes = function () { var c = this.m.c; return 2 * c.L * this.n * c.G * c.D *
    (c.kv === "f32" ? 4 : 8); };
  /* o: {all: logits at every position (else the last), noAtt, resid: keep the residual stream
     (L + 1 rows of (T, C)), trace: record every step of the chunk's last token} */
  Cache.prototype.feed = function (ids, o) {
    o = o || {};
    var m = this.m, c = m.c, M = m.M, C = c.C, H = c.H, G = c.G, D = c.D,
      T = ids.length, t0 = this.n, i, t;
    if (!T) throw new Error("feed needs at least one token");
    if (t0 + T > c.T) throw new Error("the context is full (" + c.T + " tokens)");
    for (i = 0; i < T; i++) if (!(ids[i] >= 0 && ids[i] < c.V && ids[i] === Math.floor(
      ids[i]))) throw new Error("token id " + ids[i] + " is not in the vocabulary of " + c.V);
    if (t0 + T > this.cap) this.grow(t0 + T);
    var steps = o.trace ? [] : null, last = T - 1, nn = NORM_NAME[c.norm];
    function rec(key, layer, fn, rows, extra) {
      if (!steps) return;
      var s = { key: key, layer: layer, fn: fn };
      if (rows) s.rows = rows.map(function (r) { return [r[0], rowOf(r[1], last, r[2] || C)]; });
      for (var k in extra) if (Object.prototype.hasOwnProperty.call(extra, k)) s[k] = extra[k];
      steps.push(s);
    }
    /* the embedding: token rows, plus the position table's rows (learned / sinusoidal positions) */
    var X = new Float64Array(T * C);
    for (t = 0; t < T; t++) {
      X.set(M.tok.row(ids[t]), t * C);
      if (M.pos) for (i = 0; i < C; i++) X[t * C + i] += M.pos[(t0 + t) * C + i];
    }
    var resid = o.resid || steps ? [Float64Array.from(X)] : null, att = [];
    rec("embed", -1, M.pos ? "GPT.embed (Embeddings): tok_emb[token] + pos_emb[position]" :
      "GPT.embed (Embeddings): tok_emb[token]", [["x", X]]);
    for (var l = 0; l < c.L; l++) {
      var y = M.layers[l], L1 = "layer " + (l + 1) + ": ", h = X;
      if (c.normFirst) { h = norm(X, T, C, y.n1w, y.n1b, c.eps, c.norm); rec("norm1", l,
        L1 + "DecoderLayer.norm1 (" + nn + ")", [["norm1(x)", h]]); }
      var q = linear(y.q, y.qb, h, T), k = linear(y.k, y.kb, h, T), v = linear(y.v, y.vb, h, T);
      if (c.pos === "rope") { rope(q, T, H, D, t0, c.ropeBase); rope(k, T, G, D, t0, c.ropeBase); }
      rec("qkv", l, L1 + "MultiHeadAttention.q_proj, k_proj, v_proj (Linear)" + (c.pos === "rope" ?
        ", RoPE on q and k" : "") + ", split into " + H + " heads of " + D + (G < H ?
        " (keys and values: " + G + " heads)" : ""),
        [["q", q, H * D], ["k", k, G * D], ["v", v, G * D]], { heads: H });
      /* the cache is head by head, (G, cap, D): each new token's row of each
         head goes into its slot */
      for (t = 0; t < T; t++) for (var g = 0; g < G; g++) {
        this.K[l].set(k.subarray(t * G * D + g * D, t * G * D + (g + 1) * D),
          (g * this.cap + t0 + t) * D);
        this.V[l].set(v.subarray(t * G * D + g * D, t * G * D + (g + 1) * D),
          (g * this.cap + t0 + t) * D);
      }
      var Tk = t0 + T, r = E.attendHeadsCached(q, this.K[l], this.V[l], T, Tk, this.cap, H, G, D,
        { isCausal: T > 1, headMask: this.off ? this.off[l] : null });
      if (!o.noAtt) { /* att[layer][head][t]: query t0 + t's weights over its t0 + t + 1 keys */
        var rows = [];
        for (var hh = 0; hh < H; hh++) {
          var per = [];
          for (t = 0; t < T; t++) per.push(r.weights.slice((hh * T + t) * Tk,
            (hh * T + t) * Tk + t0 + t + 1));
          rows.push(per);
        }
        att.push(rows);
      }
      if (steps) rec("weights", l, L1 + "attnlib.scaled_dot_product_attention, per head, over " +
        "the " + Tk + " cached keys", null, { weights: att[l].map(function (per) { return per[last];
        }), off: this.off ? this.off[l].slice() : null });
      var a = linear(y.o, y.ob, r.merged, T);
      rec("out", l, L1 + "MultiHeadAttention.merge_heads, then out_proj (Linear)",
        [["merged heads", r.merged, H * D], ["out_proj", a]]);
      for (i = 0; i < T * C; i++) X[i] += a[i];
      if (!c.normFirst) { X = norm(X, T, C, y.n1w, y.n1b, c.eps, c.norm); rec("add1", l,
        L1 + "residual x + attention, then DecoderLayer.norm1 (post-norm)", [["x", X]]); }
      else rec("add1", l, L1 + "residual: x + attention", [["x", X]]);
      var u = X;
      if (c.normFirst) { u = norm(X, T, C, y.n3w, y.n3b, c.eps, c.norm); rec("norm3", l,
        L1 + "DecoderLayer.norm3 (" + nn + ")", [["norm3(x)", u]]); }
      var f = linear(y.f1, y.f1b, u, T), F = c.F, act = ACT[c.act];
      if (y.gate) { var gt = linear(y.gate, y.gateb, u, T); for (i = 0; i < T * F;
        i++) f[i] *= act(gt[i]); }
      else for (i = 0; i < T * F; i++) f[i] = act(f[i]);
      rec("ffn1", l, L1 + (y.gate ? "FeedForward.fc1 and gate (Linear), then SiLU(gate) * fc1 " +
        "(SwiGLU)" : "FeedForward.fc1 (Linear), then " + c.act.toUpperCase()),
        [[y.gate ? "silu(gate) * fc1" : c.act + "(fc1)", f, F]]);
      var z = linear(y.f2, y.f2b, f, T);
      for (i = 0; i < T * C; i++) X[i] += z[i];
      if (!c.normFirst) X = norm(X, T, C, y.n3w, y.n3b, c.eps, c.norm);
      rec("ffn2", l, L1 + "FeedForward.fc2 (Linear), residual x + FFN" + (c.normFirst ? "" :
        ", then DecoderLayer.norm3 (post-norm)"), [["fc2", z], ["x", X]]);
      if (resid) resid.push(Float64Array.from(X));
    }
    this.n = t0 + T;
    /* the logits: every position's, or the last one's only (decoding needs no more) */
    var from = o.all ? 0 : last, n = T - from, xf = X.subarray(from * C);
    if (c.normFirst) { xf = norm(xf, n, C, M.nfw, M.nfb, c.eps, c.norm); rec("normf", c.L,
      "GPT.norm_f (" + nn + ")", [["norm_f(x)", xf, C]]); }
    var Z = linear(M.head, null, xf, n), logits = [];
    for (t = 0; t < n; t++) logits.push(Z.subarray(t * c.V, (t + 1) * c.V));
    if (steps) steps.push({ key: "logits", layer: c.L, fn: "GPT.lm_head (Linear" +
      (M.head === M.tok ? ", tied to tok_emb" : "") + "), then softmax", logits: logits[n - 1] });
    return { logits: logits, att: att, steps: steps, resid: resid };
  };
  /* one token through the model: {logits, att[layer][head] (t + 1,), steps (with trace), resid} */
  Cache.prototype.step = function (id, trace) {
    var r = this.feed([id], { trace: !!trace, resid: !!trace });
    return { logits: r.logits[0], att: r.att.map(function (l) { return l.map(function (h) {
      return h[0]; }); }), steps: r.steps, resid: r.resid };
  };

  /* ------------------------------------------------------------------ the model */
  function model(c0, W) {
    var m = prepare(c0, W), c = m.c, M = m.M;
    function cache(off) { return new Cache(m, off || null); }
    /* the causal forward pass of ids on a fresh cache, the whole prompt at once (prefill) */
    function forward(ids, off, o) {
      o = o || {};
      var r = cache(off), out = { logits: [], att: [], resid: null }, l, h;
      if (ids.length) out = r.feed(ids, { all: !o.last, noAtt: o.noAtt, resid: o.resid });
      else for (l = 0; l < c.L; l++) { out.att.push([]); for (h = 0; h < c.H;
        h++) out.att[l].push([]); } /* no text */
      return { logits: out.logits, att: out.att, cache: r, resid: out.resid };
    }
    /* the logit lens: the final norm (pre-norm models; a post-norm stream is already normalised)
       and the LM head on n residual vectors (rows of X) at once -> (n, V) */
    function lens(X, n) {
      var xf = c.normFirst ? norm(X, n, c.C, M.nfw, M.nfb, c.eps, c.norm) : X,
        Z = linear(M.head, null, xf, n), out = [];
      for (var t = 0; t < n; t++) out.push(Z.subarray(t * c.V, (t + 1) * c.V));
      return out;
    }
    /* one token (position pos of ids) through the whole network, every intermediate recorded, and
       the logit lens of its residual stream */
    function trace(ids, pos, off) {
      var r = cache(off);
      if (pos > 0) r.feed(ids.slice(0, pos), { noAtt: true });
      var o = r.step(ids[pos], true), R = new Float64Array(o.resid.length * c.C);
      o.resid.forEach(function (x, k) { R.set(x, k * c.C); });
      return { steps: o.steps, resid: o.resid, lens: lens(R, o.resid.length), logits: o.logits };
    }
    /* the greedy continuation of ids: n tokens, each the most likely next one (the first of equal
       maxima, as torch.argmax) */
    function greedy(ids, n, off) {
      var r = cache(off), out = [];
      if (!ids.length) return out;
      var z = r.feed(ids, { noAtt: true }).logits[0];
      for (var k = 0; k < n && ids.length + k < c.T; k++) {
        var id = argmax(z);
        out.push(id);
        if (ids.length + k + 1 < c.T && k + 1 < n) z = r.feed([id], { noAtt: true }).logits[0];
      }
      return out;
    }
    return { config: c, cache: cache, forward: forward, trace: trace, lens: lens, greedy: greedy };
  }
  return { load: loadWeights, model: model };
})();

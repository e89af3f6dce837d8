/* attnlib's attention engine in the page: the arithmetic of attnlib.scaled_dot_product_attention
   and attnlib.MultiHeadAttention in plain JavaScript (float64), shared by every computing explorer
   and by the live model. No DOM, no globals but window.attnlibEngine, no network.

   Layouts (all row-major Float64Array): a matrix (R, C) is R rows of C numbers; nn.Linear's weight
   is (out, in), so linear(x, W, b) = x W^T + b, as in PyTorch. Heads: (T, H*D) <-> (H, T, D).
   Masks follow PyTorch SDPA (and attnlib): a bool mask is true where a query MAY attend, a float
   mask is ADDED to the scores; a mask has rows 1 (one flag per key, for every query) or Tq.
   A query row with every key masked gets weights and output zeros, never NaN (attnlib's rule). */
window.attnlibEngine = window.attnlibEngine || (function () {
  "use strict";

  function zeros(n) { return new Float64Array(n); }

  /* A (m, k) @ B (k, n) -> (m, n) */
  function matmul(A, B, m, k, n) {
    var out = zeros(m * n);
    for (var i = 0; i < m; i++) {
      for (var p = 0; p < k; p++) {
        var a = A[i * k + p];
        if (a === 0) continue;
        for (var j = 0; j < n; j++) out[i * n + j] += a * B[p * n + j];
      }
    }
    return out;
  }
  /* A (m, k) @ B^T, B given as (n, k) -> (m, n): queries against keys, or x against an (out, in)
     weight. Four outputs of two rows at a time, each its own sum over p in order (the same
     numbers as one at a time, bit for bit): every B[j, p] read serves two rows and every A[i, p]
     read four outputs (the live model's forward pass is mostly this product) */
  function matmulT(A, B, m, k, n) {
    var out = zeros(m * n), i = 0, j, p;
    for (; i + 1 < m; i += 2) {
      var a = i * k, a1 = a + k, o = i * n, o1 = o + n;
      for (j = 0; j + 3 < n; j += 4) {
        var b0 = j * k, b1 = b0 + k, b2 = b1 + k, b3 = b2 + k;
        var s0 = 0, s1 = 0, s2 = 0, s3 = 0, r0 = 0, r1 = 0, r2 = 0, r3 = 0;
        for (p = 0; p < k; p++) {
          var x = A[a + p], y = A[a1 + p], w0 = B[b0 + p], w1 = B[b1 + p], w2 = B[b2 + p],
            w3 = B[b3 + p];
          s0 += x * w0; s1 += x * w1; s2 += x * w2; s3 += x * w3;
          r0 += y * w0; r1 += y * w1; r2 += y * w2; r3 += y * w3;
        }
        out[o + j] = s0; out[o + j + 1] = s1; out[o + j + 2] = s2; out[o + j + 3] = s3;
        out[o1 + j] = r0; out[o1 + j + 1] = r1; out[o1 + j + 2] = r2; out[o1 + j + 3] = r3;
      }
      for (; j < n; j++) { dotT(A, B, a, j * k, k, out, o + j); dotT(A, B, a1,
        j * k, k, out, o1 + j); }
    }
    for (; i < m; i++) { /* an odd last row: four outputs at a time */
      var c = i * k, q = i * n;
      for (j = 0; j + 3 < n; j += 4) {
        var e0 = j * k, e1 = e0 + k, e2 = e1 + k, e3 = e2 + k, u0 = 0, u1 = 0, u2 = 0, u3 = 0;
        for (p = 0; p < k; p++) {
          var z = A[c + p];
          u0 += z * B[e0 + p]; u1 += z * B[e1 + p]; u2 += z * B[e2 + p]; u3 += z * B[e3 + p];
        }
        out[q + j] = u0; out[q + j + 1] = u1; out[q + j + 2] = u2; out[q + j + 3] = u3;
      }
      for (; j < n; j++) dotT(A, B, c, j * k, k, out, q + j);
    }
    return out;
  }
  /* out[at] = A[a .. a + k) . B[b .. b + k), summed in order */
  function dotT(A, B, a, b, k, out, at) {
    var s = 0;
    for (var p = 0; p < k; p++) s += A[a + p] * B[b + p];
    out[at] = s;
  }
  /* nn.Linear: x (rows, nIn), W (nOut, nIn), b (nOut) or null -> (rows, nOut) */
  function linear(x, W, b, rows, nIn, nOut) {
    var y = matmulT(x, W, rows, nIn, nOut);
    if (b) for (var i = 0; i < rows; i++) for (var o = 0; o < nOut; o++) y[i * nOut + o] += b[o];
    return y;
  }

  /* the scaled scores q k^T * scale, (Tq, Tk); scale null/undefined = 1 / sqrt(d_k), as attnlib */
  function scores(q, k, Tq, Tk, d, scale) {
    var s = matmulT(q, k, Tq, d, Tk), f = (scale === null || scale === undefined) ?
      1 / Math.sqrt(d) : scale;
    for (var i = 0; i < s.length; i++) s[i] *= f;
    return s;
  }

  /* masks: {kind: "bool" | "float", data, rows (1 or Tq), cols (Tk)} */
  function boolMask(data, rows, cols) { return { kind: "bool", data: data,
    rows: rows, cols: cols }; }
  function floatMask(data, rows, cols) { return { kind: "float", data: data,
    rows: rows, cols: cols }; }
  /* attnlib.causal_mask(Tq, Tk): query i may attend key j iff j <= Tk - Tq + i
     (lower-right aligned) */
  function causalMask(Tq, Tk) {
    if (Tk === undefined) Tk = Tq;
    var d = new Uint8Array(Tq * Tk);
    for (var i = 0; i < Tq; i++) for (var j = 0; j < Tk; j++) d[i * Tk + j] =
      j <= Tk - Tq + i ? 1 : 0;
    return boolMask(d, Tq, Tk);
  }
  /* attnlib.padding_mask for one sequence: one flag per key, true = a real token */
  function paddingMask(ids, padId) {
    var d = new Uint8Array(ids.length);
    for (var j = 0; j < ids.length; j++) d[j] = ids[j] === padId ? 0 : 1;
    return boolMask(d, 1, ids.length);
  }
  function checkMask(mask, Tq, Tk) {
    if (!mask) return;
    if (mask.kind !== "bool" && mask.kind !== "float") throw new Error("a mask is {kind: 'bool' " +
      "| 'float', ...}, got kind " + mask.kind);
    if (mask.cols !== Tk || (mask.rows !== 1 && mask.rows !== Tq) || mask.data.length !==
      mask.rows * mask.cols) {
      throw new Error("mask of shape (" + mask.rows + ", " + mask.cols +
        ") does not broadcast to the scores (" + Tq + ", " + Tk + ")");
    }
  }
  /* scores + mask: bool false -> -Infinity, float added (in place; returns s) */
  function applyMask(s, mask, Tq, Tk) {
    if (!mask) return s;
    checkMask(mask, Tq, Tk);
    for (var i = 0; i < Tq; i++) {
      var r = mask.rows === 1 ? 0 : i;
      for (var j = 0; j < Tk; j++) {
        var m = mask.data[r * Tk + j];
        if (mask.kind === "bool") { if (!m) s[i * Tk + j] = -Infinity; }
        else s[i * Tk + j] += m;
      }
    }
    return s;
  }
  /* logical AND of two bool masks of the same cols (rows broadcast) */
  function andMasks(a, b, Tq) {
    var Tk = a.cols, d = new Uint8Array(Tq * Tk);
    for (var i = 0; i < Tq; i++) for (var j = 0; j < Tk; j++) {
      d[i * Tk + j] = a.data[(a.rows === 1 ? 0 : i) * Tk + j] &&
        b.data[(b.rows === 1 ? 0 : i) * Tk + j] ? 1 : 0;
    }
    return boolMask(d, Tq, Tk);
  }

  /* a mask with the causal mask folded in: bool AND, float -inf where the causal mask blocks */
  function withCausal(mask, Tq, Tk) {
    checkMask(mask, Tq, Tk);
    var c = causalMask(Tq, Tk);
    if (mask.kind === "bool") return andMasks(mask, c, Tq);
    var d = new Float64Array(Tq * Tk);
    for (var i = 0; i < Tq; i++) for (var j = 0; j < Tk; j++) d[i * Tk + j] = c.data[i * Tk + j] ?
      mask.data[(mask.rows === 1 ? 0 : i) * Tk + j] : -Infinity;
    return floatMask(d, Tq, Tk);
  }

  /* softmax along each row; a row whose every entry is -Infinity gives zeros (not NaN) */
  function softmaxRows(s, rows, cols) {
    var w = zeros(rows * cols);
    for (var i = 0; i < rows; i++) {
      var m = -Infinity, z = 0, j, o = i * cols;
      for (j = 0; j < cols; j++) if (s[o + j] > m) m = s[o + j];
      if (m === -Infinity) continue; /* every key masked: zeros */
      for (j = 0; j < cols; j++) { w[o + j] = Math.exp(s[o + j] - m); z += w[o + j]; }
      for (j = 0; j < cols; j++) w[o + j] /= z;
    }
    return w;
  }
  function deadRows(s, rows, cols) { /* which rows have every entry -Infinity */
    var dead = [];
    for (var i = 0; i < rows; i++) {
      var all = true;
      for (var j = 0; j < cols && all; j++) if (s[i * cols + j] !== -Infinity) all = false;
      dead.push(all);
    }
    return dead;
  }

  /* attnlib.scaled_dot_product_attention for one head:
     q (Tq, dk), k (Tk, dk), v (Tk, dv); opts {mask, isCausal, scale}.
     Returns {out (Tq, dv), weights (Tq, Tk), scores (Tq, Tk) scaled and masked, dead [Tq bools]}.
     */
  function attention(q, k, v, Tq, Tk, dk, dv, opts) {
    opts = opts || {};
    if (opts.isCausal && opts.mask) throw new Error("pass either a mask or isCausal, " +
      "not both (as attnlib)");
    if (opts.isCausal && Tq !== Tk) throw new Error("isCausal needs Tq == Tk, got Tq=" + Tq +
      ", Tk=" + Tk + "; pass causalMask(Tq, Tk) instead");
    var s = scores(q, k, Tq, Tk, dk, opts.scale);
    applyMask(s, opts.isCausal ? causalMask(Tq, Tk) : opts.mask, Tq, Tk);
    var w = softmaxRows(s, Tq, Tk);
    return { out: matmul(w, v, Tq, Tk, dv), weights: w, scores: s, dead: deadRows(s, Tq, Tk) };
  }

  /* heads: (T, H*D) -> (H, T, D) and back (MultiHeadAttention.split_heads / merge_heads) */
  function splitHeads(x, T, H, D) {
    var out = zeros(H * T * D);
    for (var t = 0; t < T; t++) for (var h = 0; h < H; h++) for (var d = 0; d < D;
      d++) out[(h * T + t) * D + d] = x[t * H * D + h * D + d];
    return out;
  }
  function mergeHeads(x, H, T, D) {
    var out = zeros(T * H * D);
    for (var h = 0; h < H; h++) for (var t = 0; t < T; t++) for (var d = 0; d < D;
      d++) out[t * H * D + h * D + d] = x[(h * T + t) * D + d];
    return out;
  }

  /* Attention of H query heads over G key/value heads (G = H: multi-head;
     query head h reads key/value
     head floor(h / (H / G))), on projections already made: q (Tq, H*D), k and v (Tk, G*D).
     opts {mask, isCausal, scale, headMask: H numbers multiplying each head's output (0 = switched
     off)}. Returns {merged (Tq, H*D) (before out_proj), heads (H, Tq, D), weights (H, Tq, Tk), dead
     (H x Tq)}. */
  function attendHeads(q, k, v, Tq, Tk, H, G, D, opts) {
    opts = opts || {};
    if (H % G) throw new Error("n_heads=" + H + " must be divisible by n_kv_heads=" + G);
    /* as MultiHeadAttention: is_causal with a mask ANDs the (lower-right) causal mask into it */
    var mask = opts.mask;
    if (opts.isCausal) mask = mask ? withCausal(mask, Tq, Tk) : causalMask(Tq, Tk);
    var sub = { mask: mask, scale: opts.scale };
    var qs = splitHeads(q, Tq, H, D), ks = splitHeads(k, Tk, G, D), vs = splitHeads(v, Tk, G, D);
    var heads = zeros(H * Tq * D), weights = zeros(H * Tq * Tk), dead = [], per = H / G;
    for (var h = 0; h < H; h++) {
      var g = Math.floor(h / per);
      var r = attention(qs.subarray(h * Tq * D, (h + 1) * Tq * D), ks.subarray(g * Tk * D,
        (g + 1) * Tk * D), vs.subarray(g * Tk * D, (g + 1) * Tk * D), Tq, Tk, D, D, sub);
      var f = opts.headMask ? opts.headMask[h] : 1;
      for (var n = 0; n < Tq * D; n++) heads[h * Tq * D + n] = f * r.out[n];
      weights.set(r.weights, h * Tq * Tk);
      dead.push(r.dead);
    }
    return { merged: mergeHeads(heads, H, Tq, D), heads: heads, weights: weights, dead: dead };
  }

  /* attendHeads over keys and values held in a cache laid out head by head, (G, Tcap, D) with the
     first Tk rows of each head filled (the live model's KV cache, which then needs no copy per
     step): the same arithmetic as attendHeads on those rows. */
  function attendHeadsCached(q, Kc, Vc, Tq, Tk, Tcap, H, G, D, opts) {
    opts = opts || {};
    if (H % G) throw new Error("n_heads=" + H + " must be divisible by n_kv_heads=" + G);
    if (Tk > Tcap) throw new Error("the cache holds " + Tcap + " rows, asked for " + Tk);
    var mask = opts.mask;
    if (opts.isCausal) mask = mask ? withCausal(mask, Tq, Tk) : causalMask(Tq, Tk);
    var sub = { mask: mask, scale: opts.scale }, qs = splitHeads(q, Tq, H, D), per = H / G;
    var heads = zeros(H * Tq * D), weights = zeros(H * Tq * Tk), dead = [];
    for (var h = 0; h < H; h++) {
      var g = Math.floor(h / per), o = g * Tcap * D;
      var r = attention(qs.subarray(h * Tq * D, (h + 1) * Tq * D), Kc.subarray(o, o + Tk * D),
        Vc.subarray(o, o + Tk * D), Tq, Tk, D, D, sub);
      var f = opts.headMask ? opts.headMask[h] : 1;
      for (var n = 0; n < Tq * D; n++) heads[h * Tq * D + n] = f * r.out[n];
      weights.set(r.weights, h * Tq * Tk);
      dead.push(r.dead);
    }
    return { merged: mergeHeads(heads, H, Tq, D), heads: heads, weights: weights, dead: dead };
  }

  /* attnlib.MultiHeadAttention.forward for one sequence: x (Tq, C); context (Tk, C) or null (self-
     attention); p {C, H, G (default H), q: {w, b}, k, v, o} with nn.Linear layouts (k, v: (G*D,
     C)). opts as attendHeads. Returns attendHeads' result plus out (Tq, C), q (Tq, C), k and v (Tk,
     G*D). */
  function multiHeadAttention(x, Tq, context, Tk, p, opts) {
    var C = p.C, H = p.H, G = p.G || p.H, D = C / H;
    if (D !== Math.floor(D)) throw new Error("d_model=" + C + " is not divisible by n_heads=" + H);
    var src = context || x;
    if (!context) Tk = Tq;
    var q = linear(x, p.q.w, p.q.b, Tq, C, C), k = linear(src, p.k.w, p.k.b, Tk, C, G * D),
      v = linear(src, p.v.w, p.v.b, Tk, C, G * D);
    var r = attendHeads(q, k, v, Tq, Tk, H, G, D, opts);
    r.out = linear(r.merged, p.o.w, p.o.b, Tq, C, C);
    r.q = q; r.k = k; r.v = v;
    return r;
  }

  /* The four ways the ecosystem writes one mask (chapter 5), each read into the engine's form.
     values: (rows, Tk) numbers as written in that convention (bool as 1 / 0; -Infinity for -inf).
       sdpa     bool, 1 = may attend (PyTorch SDPA, attnlib)
       nn_mha   bool, 1 = blocked (nn.MultiheadAttention's attn_mask / key_padding_mask)
       additive float, 0 = allowed, -inf = blocked (added to the scores)
       hf Hugging Face attention_mask: one flag per key, 1 = real token, 0 = padding; the model adds
       its causal part itself (causal = true) */
  var CONVENTIONS = ["sdpa", "nn_mha", "additive", "hf"];
  function fromConvention(name, values, rows, Tk) {
    var n = rows * Tk, d, i;
    if (name === "sdpa" || name === "nn_mha") {
      d = new Uint8Array(n);
      for (i = 0; i < n; i++) d[i] = (name === "sdpa" ? values[i] !== 0 : values[i] === 0) ? 1 : 0;
      return boolMask(d, rows, Tk);
    }
    if (name === "additive") return floatMask(Float64Array.from(values), rows, Tk);
    if (name === "hf") {
      if (rows !== 1) throw new Error("an HF attention_mask holds one flag per key " +
        "(rows 1), got rows " + rows);
      d = new Uint8Array(Tk);
      for (i = 0; i < Tk; i++) d[i] = values[i] === 1 ? 1 : 0;
      return boolMask(d, 1, Tk);
    }
    throw new Error("unknown mask convention " + name + "; one of " + CONVENTIONS.join(", "));
  }
  /* an engine bool mask (1 = may attend) written in a convention (hf: the
     per-key flags of row 0) */
  function toConvention(name, mask) {
    var out = [], i;
    if (name === "hf") { for (i = 0; i < mask.cols;
      i++) out.push(mask.data[i] ? 1 : 0); return out; }
    for (i = 0; i < mask.data.length; i++) {
      var ok = !!mask.data[i];
      out.push(name === "sdpa" ? (ok ? 1 : 0) : name === "nn_mha" ?
        (ok ? 0 : 1) : (ok ? 0 : -Infinity));
    }
    return out;
  }
  /* the mask a model builds from an HF attention_mask: padding flags, AND the
     causal mask if causal */
  function fromHF(flags, Tq, causal) {
    var pad = fromConvention("hf", flags, 1, flags.length);
    return causal ? andMasks(pad, causalMask(Tq, flags.length), Tq) : andMasks(pad,
      boolMask(new Uint8Array(Tq * flags.length).fill(1), Tq, flags.length), Tq);
  }

  return {
    version: 1, matmul: matmul, matmulT: matmulT, linear: linear,
      scores: scores, boolMask: boolMask,
    floatMask: floatMask, causalMask: causalMask, withCausal: withCausal, paddingMask: paddingMask,
      applyMask: applyMask, andMasks: andMasks,
    softmaxRows: softmaxRows, attention: attention, splitHeads: splitHeads, mergeHeads: mergeHeads,
    attendHeads: attendHeads, attendHeadsCached: attendHeadsCached, multiHeadAttention:
      multiHeadAttention, CONVENTIONS: CONVENTIONS,
    fromConvention: fromConvention, toConvention: toConvention, fromHF: fromHF
  };
})();

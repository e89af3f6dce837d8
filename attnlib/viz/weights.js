/* attnlib's weight matrices in the page: the products of the live model (live_model.js) with its
   weights as the page holds them. No DOM, no network; defines window.attnlibWeights once (every
   live output carries this file).

   Three kinds of matrix, one interface. A matrix is nn.Linear's weight, (rows = out, cols = in):
     dense(a, rows, cols)          numbers in a Float64Array (the tiny GPT's payload)
     q4_1(bytes, offset, rows, cols, perm, acc)   GGUF's Q4_1 blocks, read where the file holds them
     q8_0(bytes, offset, rows, cols, acc)         GGUF's Q8_0 blocks
     (SmolLM2's embedding and LM head)
   m.mul(X, T) -> Y (T, rows) = X W^T for X (T, cols), as nn.Linear without its bias
   m.row(i)    -> row i as a Float64Array (cols,): an embedding lookup
   m.rows, m.cols, m.nbytes (what the tab holds for it), m.kind.

   Why the blocks stay blocks: SmolLM2's weights are 98 MB as the file stores them and 540 MB as
   float32 numbers, too much for a phone's tab. A block of 32 weights is decoded inside the product,
   w = d * q + m, where d and m are the block's float16 scale and minimum and q its 4-bit integers:
     sum_j w_j x_j = d * sum_j q_j x_j + m * sum_j x_j
   so a one-row product (decoding a token) needs one multiply-add per weight on small integers and
   the sums of x per block, computed once per product. A product over many rows (a prompt of T
   tokens) decodes each matrix row once and reuses it for every token.
   acc (optional): wasm.js's products, the same arithmetic in WebAssembly SIMD (float32), used when
   the file's bytes lie in its memory; this file's JavaScript is the path without it. */
window.attnlibWeights = window.attnlibWeights || (function () {
  "use strict";
  var BLOCK = 32;

  /* float16 bits -> number, as a table of all 65,536 (built once, on first use) */
  var F16 = null;
  function half(h) {
    var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * f * Math.pow(2, -24);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * (1 + f / 1024) * Math.pow(2, e - 15);
  }
  function f16Table() {
    if (!F16) { F16 = new Float64Array(65536); for (var i = 0; i < 65536; i++) F16[i] = half(i); }
    return F16;
  }

  /* ------------------------------------------------------------------ dense (float64) */
  /* X (T, k) @ W^T: the engine's product (window.attnlibEngine.matmulT, loaded first) */
  function dense(a, rows, cols) {
    if (a.length !== rows * cols) throw new Error("a dense matrix of " + rows + " x " + cols +
      " needs " + rows * cols + " numbers, got " + a.length);
    return {
      kind: "f64", rows: rows, cols: cols, nbytes: a.byteLength, data: a,
      mul: function (X, T) { return window.attnlibEngine.matmulT(X, a, T, cols, rows); },
      row: function (i) { return a.slice(i * cols, (i + 1) * cols); }
    };
  }

  /* ------------------------------------------------------------------ Q4_1 */
  /* 20 bytes a block: d and m (float16), then 16 bytes of 4-bit q; byte j holds weight j in its low
     nibble and weight j + 16 in its high one. Read as five 32-bit words (GGUF aligns tensors to 32
     bytes, and 20 is a multiple of 4): word 0 = d | m << 16, words 1-4 = the nibbles.
     perm (optional): output row o is stored row perm[o] (llama.cpp's order of the query and key
     rows, undone as attnlib.pretrained.unpermute_qk undoes it). */
  function q4_1(bytes, offset, rows, cols, perm, acc) {
    if (cols % BLOCK) throw new Error("a Q4_1 matrix needs a width divisible by 32, got " + cols);
    if (offset % 4) throw new Error("Q4_1 data must start at a multiple of 4 " +
      "bytes, got offset " + offset);
    if (rows % 2) throw new Error("a Q4_1 matrix needs an even number of rows, got " + rows);
    var nb = cols / BLOCK, words = 5 * nb, F = f16Table();
    var U = new Uint32Array(bytes.buffer, bytes.byteOffset + offset, rows * words);
    var xs = new Float64Array(nb), w0 = new Float64Array(cols), w1 = new Float64Array(cols);
    function start(o) { return (perm ? perm[o] : o) * words; }
    /* rows o and o + 1 . x, the integers multiplied first: d * (q . x) + m * sum(x) per block. Two
       rows at a time: each number of x read from memory serves both (measured 1.4x faster). */
    function dot2(o, x, Y) {
      var w = start(o), v = start(o + 1), s = 0, t = 0;
      for (var b = 0; b < nb; b++, w += 5, v += 5) {
        var i = b * BLOCK, a = 0, c = 0;
        for (var k = 0; k < 4; k++) {
          var q = U[w + 1 + k], r = U[v + 1 + k], j = i + 4 * k, x0 = x[j], x1 = x[j + 16];
          a += (q & 15) * x0 + ((q >>> 4) & 15) * x1; c += (r & 15) * x0 + ((r >>> 4) & 15) * x1;
          x0 = x[j + 1]; x1 = x[j + 17];
          a += ((q >>> 8) & 15) * x0 + ((q >>> 12) & 15) * x1; c += ((r >>> 8) & 15) *
            x0 + ((r >>> 12) & 15) * x1;
          x0 = x[j + 2]; x1 = x[j + 18];
          a += ((q >>> 16) & 15) * x0 + ((q >>> 20) & 15) * x1; c += ((r >>> 16) & 15) *
            x0 + ((r >>> 20) & 15) * x1;
          x0 = x[j + 3]; x1 = x[j + 19];
          a += ((q >>> 24) & 15) * x0 + (q >>> 28) * x1;
          c += ((r >>> 24) & 15) * x0 + (r >>> 28) * x1;
        }
        var dm = U[w], em = U[v];
        s += F[dm & 0xffff] * a + F[dm >>> 16] * xs[b];
        t += F[em & 0xffff] * c + F[em >>> 16] * xs[b];
      }
      Y[o] = s; Y[o + 1] = t;
    }
    /* row o decoded into out: w = d * q + m */
    function decode(o, out) {
      var w = start(o);
      for (var b = 0; b < nb; b++, w += 5) {
        var dm = U[w], d = F[dm & 0xffff], m = F[dm >>> 16], i = b * BLOCK;
        for (var k = 0; k < 4; k++) {
          var q = U[w + 1 + k], j = i + 4 * k;
          out[j] = d * (q & 15) + m; out[j + 16] = d * ((q >>> 4) & 15) + m;
          out[j + 1] = d * ((q >>> 8) & 15) + m; out[j + 17] = d * ((q >>> 12) & 15) + m;
          out[j + 2] = d * ((q >>> 16) & 15) + m; out[j + 18] = d * ((q >>> 20) & 15) + m;
          out[j + 3] = d * ((q >>> 24) & 15) + m; out[j + 19] = d * (q >>> 28) + m;
        }
      }
      return out;
    }
    function mul(X, T) {
      if (acc) return reorder(acc.q4_1(bytes.byteOffset + offset, rows, cols, X, T), T);
      var Y = new Float64Array(T * rows), o;
      if (T === 1) {
        for (var b = 0; b < nb; b++) { var z = 0; for (var j = 0; j < BLOCK;
          j++) z += X[b * BLOCK + j]; xs[b] = z; }
        for (o = 0; o < rows; o += 2) dot2(o, X, Y); /* rows is even: every matrix of a Llama is */
        return Y;
      }
      for (o = 0; o < rows; o += 2) mulRows(decode(o, w0), decode(o + 1, w1),
        X, T, cols, Y, rows, o);
      return Y;
    }
    /* the accelerator computes the rows in the file's order: output row o is stored row perm[o] */
    function reorder(Ys, T) {
      if (!perm) return Ys;
      var Y = new Float64Array(T * rows);
      for (var t = 0; t < T; t++) for (var o = 0; o < rows;
        o++) Y[t * rows + o] = Ys[t * rows + perm[o]];
      return Y;
    }
    return {
      kind: "q4_1", rows: rows, cols: cols, nbytes: rows * words * 4, mul: mul, accelerated: !!acc,
      row: function (i) { return decode(i, new Float64Array(cols)); }
    };
  }
  /* Y[:, o] and Y[:, o + 1] = X v and X w for two decoded rows v, w (cols,) and the T rows of X:
     two rows and four tokens at a time, so each number read from memory serves two or four
     multiply-adds (a prompt runs several times faster per weight than one token does) */
  function mulRows(v, w, X, T, cols, Y, rows, o) {
    var t = 0, j;
    for (; t + 3 < T; t += 4) {
      var a = t * cols, b = a + cols, c = b + cols, d = c + cols, s0 = 0, s1 = 0, s2 = 0, s3 = 0,
        u0 = 0, u1 = 0, u2 = 0, u3 = 0;
      for (j = 0; j < cols; j++) {
        var p = v[j], q = w[j], xa = X[a + j], xb = X[b + j], xc = X[c + j], xd = X[d + j];
        s0 += p * xa; s1 += p * xb; s2 += p * xc; s3 += p * xd; u0 += q * xa; u1 += q * xb;
        u2 += q * xc; u3 += q * xd;
      }
      Y[t * rows + o] = s0; Y[(t + 1) * rows + o] = s1; Y[(t + 2) * rows + o] = s2;
      Y[(t + 3) * rows + o] = s3;
      Y[t * rows + o + 1] = u0; Y[(t + 1) * rows + o + 1] = u1; Y[(t + 2) * rows + o + 1] = u2;
      Y[(t + 3) * rows + o + 1] = u3;
    }
    for (; t < T; t++) {
      var e = t * cols, s = 0, u = 0;
      for (j = 0; j < cols; j++) { s += v[j] * X[e + j]; u += w[j] * X[e + j]; }
      Y[t * rows + o] = s; Y[t * rows + o + 1] = u;
    }
  }

  /* ------------------------------------------------------------------ Q8_0 */
  /* 34 bytes a block: d (float16), then 32 signed bytes q: w = d * q */
  function q8_0(bytes, offset, rows, cols, acc) {
    if (cols % BLOCK || rows % 2) throw new Error("a Q8_0 matrix needs a width divisible by 32 " +
      "and an even number of rows, got " + rows + " x " + cols);
    var nb = cols / BLOCK, per = 34 * nb, F = f16Table();
    var B = new Uint8Array(bytes.buffer, bytes.byteOffset + offset, rows * per);
    var I = new Int8Array(bytes.buffer, bytes.byteOffset + offset, rows * per),
      w0 = new Float64Array(cols), w1 = new Float64Array(cols);
    function decode(o, out) {
      for (var b = 0, p = o * per; b < nb; b++, p += 34) {
        var d = F[B[p] | (B[p + 1] << 8)], i = b * BLOCK;
        for (var j = 0; j < BLOCK; j++) out[i + j] = d * I[p + 2 + j];
      }
      return out;
    }
    /* rows o and o + 1 . x: d * (q . x) per block, two rows at a time as in Q4_1 */
    function dot2(o, x, Y) {
      var s = 0, t = 0, p = o * per, r = p + per;
      for (var b = 0; b < nb; b++, p += 34, r += 34) {
        var i = b * BLOCK, a = 0, c = 0;
        for (var j = 0; j < BLOCK; j++) { var xj = x[i + j]; a += I[p + 2 + j] * xj;
          c += I[r + 2 + j] * xj; }
        s += F[B[p] | (B[p + 1] << 8)] * a; t += F[B[r] | (B[r + 1] << 8)] * c;
      }
      Y[o] = s; Y[o + 1] = t;
    }
    function mul(X, T) {
      if (acc) return acc.q8_0(bytes.byteOffset + offset, rows, cols, X, T);
      var Y = new Float64Array(T * rows), o;
      if (T === 1) { for (o = 0; o < rows; o += 2) dot2(o, X, Y); return Y; }
      for (o = 0; o < rows; o += 2) mulRows(decode(o, w0), decode(o + 1, w1),
        X, T, cols, Y, rows, o);
      return Y;
    }
    return {
      kind: "q8_0", rows: rows, cols: cols, nbytes: rows * per, mul: mul, accelerated: !!acc,
      row: function (i) { return decode(i, new Float64Array(cols)); }
    };
  }

  return { dense: dense, q4_1: q4_1, q8_0: q8_0, half: half, BLOCK: BLOCK };
})();

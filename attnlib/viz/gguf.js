/* A GGUF file (llama.cpp's format) read in the page, for the live model (live_model.js): the header
   (metadata and the tensors' names, types, shapes and offsets) parsed from the file's bytes, and a
   Llama-architecture model (SmolLM2) turned into the runner's config and weights, as
   attnlib.pretrained.gguf reads the same file in Python. No DOM, no network; defines
   window.attnlibGGUF once.

     var f = attnlibGGUF.parse(buffer, size); {version, meta: {key: value}, tensors: {name: {type,
                                               shape (rows first, as torch), offset}}, bytes}: the
                                               file is the first size bytes of buffer (default all)
     var m = attnlibGGUF.llama(f, maxT, acc); {config, weights, nbytes} for attnlibLiveModel.model;
                                               acc: wasm.js's products (optional)
   The weights stay in the file's buffer: a Q4_1 or Q8_0 matrix is a view of its blocks
   (weights.js), only the norms' few float32 vectors are copied. A file that is not GGUF, is cut
   short, or holds another architecture or block type is an Error whose message says which. */
window.attnlibGGUF = window.attnlibGGUF || (function () {
  "use strict";
  var Wt = window.attnlibWeights;
  var TYPES = { 0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
    10: "Q2_K", 12: "Q4_K", 14: "Q6_K" };

  /* ------------------------------------------------------------------ the header */
  function parse(buffer, size) {
    var length = size === undefined ? buffer.byteLength : size, dv = new DataView(buffer, 0,
      length), p = 0, utf8 = new TextDecoder("utf-8");
    function need(n, what) {
      if (p + n > length) throw new Error("the file ends inside its header (" + what + " at byte " +
        p + " of " + length + "): it is cut short");
    }
    function u32() { need(4, "a number"); var v = dv.getUint32(p, true); p += 4; return v; }
    function u64() { /* sizes and counts: well below 2^53 in any file a page can hold */
      need(8, "a number"); var lo = dv.getUint32(p, true), hi = dv.getUint32(p + 4, true); p += 8;
      if (hi > 0x1fffff) throw new Error("a 64-bit size in the header is too large (" + hi +
        " * 2^32): not a GGUF file a page can read");
      return hi * 4294967296 + lo;
    }
    function str() { var n = u64(); need(n, "a string"); var s = utf8.decode(new Uint8Array(buffer,
      p, n)); p += n; return s; }
    var SCALAR = {
      0: function () { need(1, "uint8"); return dv.getUint8(p++); }, 1: function () {
        need(1, "int8"); return dv.getInt8(p++); },
      2: function () { need(2, "uint16"); p += 2; return dv.getUint16(p - 2, true); },
        3: function () { need(2, "int16"); p += 2; return dv.getInt16(p - 2, true); },
      4: u32, 5: function () { need(4, "int32"); p += 4; return dv.getInt32(p - 4, true); },
      6: function () { need(4, "float32"); p += 4; return dv.getFloat32(p - 4, true); },
        7: function () { need(1, "bool"); return dv.getUint8(p++) !== 0; },
      8: str, 10: u64, 11: function () { need(8, "int64"); p += 8;
        return Number(dv.getBigInt64(p - 8, true)); },
      12: function () { need(8, "float64"); p += 8; return dv.getFloat64(p - 8, true); }
    };
    function value(type) {
      if (type === 9) { /* an array: its element type, its length, the elements */
        var et = u32(), n = u64(), out = new Array(n);
        if (!SCALAR[et]) throw new Error("unknown GGUF array element type " + et);
        if (et === 5 || et === 4) { /* int32 arrays (token types): one typed copy */
          need(4 * n, "an int array");
          var a = new Int32Array(buffer.slice(p, p + 4 * n)); p += 4 * n; return a;
        }
        for (var i = 0; i < n; i++) out[i] = SCALAR[et]();
        return out;
      }
      if (!SCALAR[type]) throw new Error("unknown GGUF value type " + type + " at byte " + p);
      return SCALAR[type]();
    }
    if (length < 24 || utf8.decode(new Uint8Array(buffer, 0, 4)) !== "GGUF") {
      throw new Error("this is not a GGUF file (it does not start with the " +
        "bytes \u201cGGUF\u201d)");
    }
    p = 4;
    var version = u32();
    if (version < 2 || version > 3) throw new Error("GGUF version " + version +
      " is not supported (2 or 3 are)");
    var nTensors = u64(), nKV = u64(), meta = {}, tensors = {}, order = [];
    for (var k = 0; k < nKV; k++) { var key = str(); meta[key] = value(u32()); }
    for (k = 0; k < nTensors; k++) {
      var name = str(), nd = u32(), dims = [];
      for (var d = 0; d < nd; d++) dims.push(u64());
      var type = u32(), off = u64();
      /* ggml lists dimensions innermost first; torch (and weights.js) read rows first */
      tensors[name] = { type: TYPES[type] || "type " + type,
        shape: dims.slice().reverse(), offset: off };
      order.push(name);
    }
    var align = meta["general.alignment"] || 32, start = Math.ceil(p / align) * align;
    order.forEach(function (n) {
      var t = tensors[n], end = start + t.offset + tensorBytes(t);
      t.offset += start;
      if (end > length) throw new Error("the file is cut short: tensor " + n +
        " needs bytes up to " + end + " but the file has " + length);
    });
    return { version: version, meta: meta, tensors: tensors,
      bytes: new Uint8Array(buffer, 0, length) };
  }
  function tensorBytes(t) {
    var n = t.shape.reduce(function (a, b) { return a * b; }, 1);
    return { F32: 4 * n, F16: 2 * n, Q4_1: 20 * n / 32, Q8_0: 34 * n / 32 }[t.type] || 0;
  }

  /* ------------------------------------------------------------------ a Llama model */
  /* llama.cpp stores each head's query and key rows as interleaved pairs (i, i + D/2); attnlib and
     Hugging Face keep [first half | second half] (rotate-half RoPE). Output row h*D + half*D/2 + i
     is stored row h*D + 2i + half (attnlib.pretrained.gguf.unpermute_qk). */
  function unpermute(n, D) {
    var perm = new Int32Array(n * D);
    for (var h = 0; h < n; h++) for (var half = 0; half < 2; half++) for (var i = 0; i < D / 2;
      i++) perm[h * D + half * D / 2 + i] = h * D + 2 * i + half;
    return perm;
  }
  function llama(f, maxT, acc) {
    var M = f.meta, T = f.tensors;
    if (M["general.architecture"] !== "llama") throw new Error("expected a GGUF file of " +
      "architecture \u201cllama\u201d, got " + M["general.architecture"]);
    function size(key) {
      var v = M["llama." + key];
      if (!(v >= 1)) throw new Error("the file has no usable metadata llama." +
        key + " (got " + v + ")");
      return v;
    }
    var C = size("embedding_length"), H = size("attention.head_count"),
      G = M["llama.attention.head_count_kv"] || H;
    var V = M["llama.vocab_size"] || (M["tokenizer.ggml.tokens"] || []).length, D = C / H;
    var c = { L: size("block_count"), H: H, G: G, C: C, D: D, F: size("feed_forward_length"), V: V,
      T: Math.min(size("context_length"), maxT || Infinity), act: "swiglu",
        norm: "rmsnorm", normFirst: true,
      eps: M["llama.attention.layer_norm_rms_epsilon"], pos: "rope",
        ropeBase: M["llama.rope.freq_base"] || 10000, kv: "f32" };
    if (C % H || H % G) throw new Error("head counts " + H + " and " + G +
      " do not divide the width " + C);
    var W = {}, nbytes = 0;
    function tensor(name, rows, cols, perm) {
      var t = T[name];
      if (!t) throw new Error("the file has no tensor " + name);
      var n = t.shape.reduce(function (a, b) { return a * b; }, 1);
      if (n !== rows * cols) throw new Error(name + " has shape (" + t.shape.join(", ") +
        "), expected (" + rows + ", " + cols + ")");
      var m;
      if (t.type === "F32") m = Float64Array.from(new Float32Array(f.bytes.buffer.slice(
        t.offset, t.offset + 4 * n)));
      else if (t.type === "Q4_1") m = Wt.q4_1(f.bytes, t.offset, rows, cols, perm, acc);
      else if (t.type === "Q8_0") { if (perm) throw new Error(name + ": Q8_0 query or key rows " +
        "are not supported"); m = Wt.q8_0(f.bytes, t.offset, rows, cols, acc); }
      else throw new Error(name + " is stored as " + t.type +
        "; the page reads F32, Q4_1 and Q8_0");
      nbytes += m.nbytes || m.byteLength;
      return m;
    }
    W.tok = tensor("token_embd.weight", V, C);
    for (var l = 0; l < c.L; l++) {
      var b = "blk." + l + ".", p = "l" + l + ".";
      W[p + "n1.w"] = tensor(b + "attn_norm.weight", 1, C);
      W[p + "q.w"] = tensor(b + "attn_q.weight", H * D, C, unpermute(H, D));
      W[p + "k.w"] = tensor(b + "attn_k.weight", G * D, C, unpermute(G, D));
      W[p + "v.w"] = tensor(b + "attn_v.weight", G * D, C);
      W[p + "o.w"] = tensor(b + "attn_output.weight", C, H * D);
      W[p + "n3.w"] = tensor(b + "ffn_norm.weight", 1, C);
      W[p + "gate.w"] = tensor(b + "ffn_gate.weight", c.F, C);
      W[p + "f1.w"] = tensor(b + "ffn_up.weight", c.F, C);
      W[p + "f2.w"] = tensor(b + "ffn_down.weight", C, c.F);
    }
    W["nf.w"] = tensor("output_norm.weight", 1, C);
    if (T["output.weight"]) W.head = tensor("output.weight", V, C); /* else tied to the embedding */
    return { config: c, weights: W, nbytes: nbytes };
  }

  return { parse: parse, llama: llama, unpermute: unpermute };
})();

/* attnlib's products of GGUF blocks in WebAssembly SIMD, for weights.js: the same arithmetic as its
   plain-JavaScript products (w = d * q + m per block of 32, Q8_0 w = d * q), four numbers per
   instruction in float32, about three times as fast. Optional: a browser without WebAssembly SIMD
   (or a page that says window.attnlibNoWasm = true) keeps the JavaScript path, which the tests hold
   equal to attnlib too. No DOM, no network, no build step: the module is assembled here, from the
   instruction lists below, into its bytes. Defines window.attnlibWasm once.

     var A = attnlibWasm.create(memory, base)   memory: the WebAssembly.Memory that holds the GGUF
                                                file at [0, file size); base: the first free byte
                                                after it; null where SIMD is unavailable
     A.q4_1(offset, rows, cols, X, T) / A.q8_0(...) -> Y (T, rows) Float64Array, rows in file order

   Memory after base: the float16 table (65,536 float32), then room for the inputs X, the outputs Y
   and one decoded row; SCRATCH says how many bytes to reserve. Inputs and outputs are float32 (as
   attnlib's own float32 model); a product over more tokens than fit is done in chunks. */
window.attnlibWasm = window.attnlibWasm || (function () {
  "use strict";
  var SCRATCH = (1 << 18) + (2 << 20) + (4 << 20) + (1 << 16); /* f16 table,
     X, Y, one row: 6.3 MB */

  /* ------------------------------------------------------------------ a small assembler */
  /* mnemonic -> [opcode bytes, immediates]; immediates: "u" unsigned LEB128, "s" signed LEB128,
     "m" a memory offset (alignment 0, then the offset), "f" a float32 */
  var OPS = {
    "block": [[0x02, 0x40], ""], "loop": [[0x03, 0x40], ""], "end": [[0x0b], ""], "br": [[0x0c],
      "u"], "br_if": [[0x0d], "u"],
    "local.get": [[0x20], "u"], "local.set": [[0x21], "u"], "local.tee": [[0x22], "u"],
    "i32.load": [[0x28], "m"], "f32.load": [[0x2a], "m"], "i32.load16_u": [[0x2f], "m"],
      "f32.store": [[0x38], "m"],
    "i32.const": [[0x41], "s"], "f32.const": [[0x43], "f"],
    "i32.eqz": [[0x45], ""], "i32.ge_u": [[0x4f], ""], "i32.add": [[0x6a], ""], "i32.sub": [[0x6b],
      ""], "i32.mul": [[0x6c], ""],
    "i32.and": [[0x71], ""], "i32.shl": [[0x74], ""], "i32.shr_u": [[0x76], ""], "f32.add": [[0x92],
      ""], "f32.mul": [[0x94], ""],
    "v128.load": [[0xfd, 0x00], "m"], "v128.store": [[0xfd, 0x0b], "m"], "i32x4.splat":
      [[0xfd, 0x11], ""], "f32x4.splat": [[0xfd, 0x13], ""],
    "f32x4.extract_lane": [[0xfd, 0x1f], "b"], "v128.and": [[0xfd, 0x4e], ""],
    "i16x8.extend_low_i8x16_s": [[0xfd, 0x87, 0x01], ""], "i16x8.extend_high_i8x16_s":
      [[0xfd, 0x88, 0x01], ""],
    "i32x4.extend_low_i16x8_s": [[0xfd, 0xa7, 0x01], ""], "i32x4.extend_high_i16x8_s":
      [[0xfd, 0xa8, 0x01], ""],
    "i32x4.shr_u": [[0xfd, 0xad, 0x01], ""], "f32x4.add": [[0xfd, 0xe4, 0x01], ""], "f32x4.mul":
      [[0xfd, 0xe6, 0x01], ""],
    "f32x4.convert_i32x4_s": [[0xfd, 0xfa, 0x01], ""], "f32x4.convert_i32x4_u":
      [[0xfd, 0xfb, 0x01], ""]
  };
  function uleb(n, out) { do { var b = n & 0x7f; n = Math.floor(n / 128);
    out.push(n ? b | 0x80 : b); } while (n); }
  function sleb(n, out) {
    for (;;) { var b = n & 0x7f; n >>= 7; if ((n === 0 && !(b & 0x40)) || (n === -1 &&
      (b & 0x40))) { out.push(b); return; } out.push(b | 0x80); }
  }
  function assemble(code) { /* a list of mnemonics, each followed by its immediate -> bytes */
    var out = [];
    for (var i = 0; i < code.length; i++) {
      var op = OPS[code[i]];
      if (!op) throw new Error("unknown instruction " + code[i]);
      Array.prototype.push.apply(out, op[0]);
      if (op[1] === "u") uleb(code[++i], out);
      else if (op[1] === "s") sleb(code[++i], out);
      else if (op[1] === "b") out.push(code[++i]);
      else if (op[1] === "m") { out.push(0); uleb(code[++i], out); }
      else if (op[1] === "f") Array.prototype.push.apply(out,
        new Uint8Array(new Float32Array([code[++i]]).buffer));
    }
    return out;
  }
  function vec(items) { var out = []; uleb(items.length, out); items.forEach(function (x) {
    Array.prototype.push.apply(out, x); }); return out; }
  function str(s) { return vec(Array.from(s).map(function (c) { return [c.charCodeAt(0)]; })); }
  function section(id, body) { var out = [id]; uleb(body.length, out); return out.concat(body); }
  var I32 = 0x7f, F32 = 0x7d, V128 = 0x7b;
  /* functions: {name, params (count of i32), locals [[count, type]], code} -> the module's bytes */
  function module(fns) {
    var types = fns.map(function (f) { var p = []; for (var k = 0; k < f.params; k++) p.push([I32]);
      return [0x60].concat(vec(p), [0]); });
    var bodies = fns.map(function (f) {
      var b = vec(f.locals.map(function (l) { var x = []; uleb(l[0], x); x.push(l[1]); return x;
        })).concat(assemble(f.code), [0x0b]);
      var out = []; uleb(b.length, out); return out.concat(b);
    });
    return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 0x01, 0, 0, 0].concat(
      section(1, vec(types)),
      section(2, vec([str("env").concat(str("mem"), [0x02, 0x00, 0x01])])),
        /* the memory, imported */
      section(3, vec(fns.map(function (f, i) { var x = []; uleb(i, x); return x; }))),
      section(7, vec(fns.map(function (f, i) { var x = []; uleb(i, x);
        return str(f.name).concat([0x00], x); }))),
      section(10, vec(bodies))));
  }

  /* ------------------------------------------------------------------ the kernels */
  /* pieces of code: g(i) reads local i; the horizontal sum of an f32x4 local */
  function g(i) { return ["local.get", i]; }
  function hsum(v) { return g(v).concat(["f32x4.extract_lane", 0], g(v), ["f32x4.extract_lane", 1,
    "f32.add"], g(v), ["f32x4.extract_lane", 2, "f32.add"], g(v),
    ["f32x4.extract_lane", 3, "f32.add"]); }
  function add(i, n) { return g(i).concat(["i32.const", n, "i32.add", "local.set", i]); }
  /* Q4_1 nibble plane k of the 16 bytes in local v: (v >> 4k) & 15 per 32-bit lane, as floats. Lane
     i then holds weight 4i + (k >> 1) + 16 (k & 1): the inputs are laid out in that order ("plane
     order", made by weights.js), so plane k meets one vector load of 4 inputs. */
  function plane(v, k, fifteen) {
    return g(v).concat(k ? ["i32.const", 4 * k, "i32x4.shr_u"] : [], g(fifteen), ["v128.and",
      "f32x4.convert_i32x4_u"]);
  }
  /* Q8_0 bytes [o, o + 16) of the block at local w as 4 vectors of 4 floats (j = 0..3) */
  function int8s(w, o, j) {
    return g(w).concat(["v128.load", o, j < 2 ? "i16x8.extend_low_i8x16_s" :
      "i16x8.extend_high_i8x16_s", j % 2 ? "i32x4.extend_high_i16x8_s" : "i32x4.extend_low_i16x8_s",
      "f32x4.convert_i32x4_s"]);
  }
  /* y[o] = row o . x, for every row: params (w, rows, nb, x, xs, y, f16);
     Q4_1 needs xs, the sums of
     x per block (for the minimum m), and x in plane order */
  function matvec(q4) {
    var W = 0, ROWS = 1, NB = 2, X = 3, XS = 4, Y = 5, F16 = 6, O = 7, B = 8, XP = 9, XB = 10,
      DM = 11, ACC = 12, P = 13, V = 14, M15 = 15, MS = 16;
    var block = [], k;
    if (q4) {
      block = g(W).concat(["i32.load", 0, "local.set", DM, "local.get", W, "v128.load", 4,
        "local.set", V], plane(V, 0, M15), g(XP), ["v128.load", 0, "f32x4.mul"]);
      for (k = 1; k < 8; k++) block = block.concat(plane(V, k, M15), g(XP), ["v128.load", 16 * k,
        "f32x4.mul", "f32x4.add"]);
      block = block.concat(["local.set", P], g(ACC), g(P), g(F16), g(DM), ["i32.const", 0xffff,
        "i32.and", "i32.const", 2, "i32.shl", "i32.add", "f32.load", 0, "f32x4.splat", "f32x4.mul",
        "f32x4.add", "local.set", ACC],
      g(MS), g(F16), g(DM), ["i32.const", 16, "i32.shr_u", "i32.const", 2, "i32.shl", "i32.add",
        "f32.load", 0], g(XB), ["f32.load", 0, "f32.mul", "f32.add", "local.set", MS],
      add(W, 20), add(XP, 128), add(XB, 4));
    } else {
      block = int8s(W, 2, 0).concat(g(XP), ["v128.load", 0, "f32x4.mul"]);
      for (k = 1; k < 8; k++) block = block.concat(int8s(W, k < 4 ? 2 : 18, k % 4), g(XP),
        ["v128.load", 16 * k, "f32x4.mul", "f32x4.add"]);
      block = block.concat(["local.set", P], g(ACC), g(P), g(F16), g(W), ["i32.load16_u", 0,
        "i32.const", 2, "i32.shl", "i32.add", "f32.load", 0, "f32x4.splat", "f32x4.mul",
        "f32x4.add", "local.set", ACC], add(W, 34), add(XP, 128));
    }
    var code = ["i32.const", 15, "i32x4.splat", "local.set", M15, "i32.const", 0,
      "local.set", O, "block", "loop"]
      .concat(g(O), g(ROWS), ["i32.ge_u", "br_if", 1, "f32.const", 0, "f32x4.splat", "local.set",
        ACC, "f32.const", 0, "local.set", MS], g(X), ["local.set", XP], g(XS), ["local.set", XB],
        g(NB), ["local.set", B, "loop"], block,
        g(B), ["i32.const", 1, "i32.sub", "local.tee", B, "br_if", 0, "end"],
        g(Y), g(O), ["i32.const", 2, "i32.shl", "i32.add"], hsum(ACC), g(MS),
          ["f32.add", "f32.store", 0], add(O, 1), ["br", 0, "end", "end"]);
    return { name: q4 ? "q4mv" : "q8mv", params: 7, locals: [[5, I32], [4, V128],
      [1, F32]], code: code };
  }
  /* Y[t, o] = row o . X[t] for T tokens (T a multiple of 4, X padded): each row decoded once into
     R (in the inputs' order), then four tokens at a time. params (w, rows, nb, X, T, Y, f16, R) */
  function matmat(q4) {
    var W = 0, ROWS = 1, NB = 2, X = 3, T = 4, Y = 5, F16 = 6, R = 7, O = 8, B = 9, RP = 10,
      TT = 11, J = 12, XP = 13, DM = 14, CB = 15, V = 16, M15 = 17, D = 18, MM = 19, S0 = 20,
      S1 = 21, S2 = 22, S3 = 23, RV = 24, k;
    var decode = [];
    if (q4) {
      decode = g(W).concat(["i32.load", 0, "local.set", DM, "local.get", W, "v128.load", 4,
        "local.set", V], g(F16), g(DM), ["i32.const", 0xffff, "i32.and", "i32.const", 2, "i32.shl",
        "i32.add", "f32.load", 0, "f32x4.splat", "local.set", D], g(F16), g(DM),
        ["i32.const", 16, "i32.shr_u", "i32.const", 2, "i32.shl", "i32.add", "f32.load", 0,
          "f32x4.splat", "local.set", MM]);
      for (k = 0; k < 8; k++) decode = decode.concat(g(RP), plane(V, k, M15), g(D), ["f32x4.mul"],
        g(MM), ["f32x4.add", "v128.store", 16 * k]);
      decode = decode.concat(add(W, 20), add(RP, 128));
    } else {
      decode = g(F16).concat(g(W), ["i32.load16_u", 0, "i32.const", 2, "i32.shl", "i32.add",
        "f32.load", 0, "f32x4.splat", "local.set", D]);
      for (k = 0; k < 8; k++) decode = decode.concat(g(RP), int8s(W, k < 4 ? 2 : 18, k % 4), g(D),
        ["f32x4.mul", "v128.store", 16 * k]);
      decode = decode.concat(add(W, 34), add(RP, 128));
    }
    /* one row against four tokens: s_i += r * X[t + i] over the row, then Y[t + i, o] = sum(s_i) */
    var S = [S0, S1, S2, S3], dots = [], stores = [];
    S.forEach(function (s, i) {
      dots = dots.concat(g(s), g(RV), g(XP), i ? g(CB).concat(["i32.const", i, "i32.mul",
        "i32.add"]) : [], ["v128.load", 0, "f32x4.mul", "f32x4.add", "local.set", s]);
      stores = stores.concat(g(Y), g(TT), ["i32.const", i, "i32.add"], g(ROWS), ["i32.mul"], g(O),
        ["i32.add", "i32.const", 2, "i32.shl", "i32.add"], hsum(s), ["f32.store", 0]);
    });
    var zero = ["f32.const", 0, "f32x4.splat"];
    var code = ["i32.const", 15, "i32x4.splat", "local.set", M15].concat(g(NB), ["i32.const", 128,
      "i32.mul", "local.set", CB, "i32.const", 0, "local.set", O, "block", "loop"], g(O), g(ROWS),
      ["i32.ge_u", "br_if", 1],
      g(R), ["local.set", RP], g(NB), ["local.set", B, "loop"], decode, g(B), ["i32.const", 1,
        "i32.sub", "local.tee", B, "br_if", 0, "end"],
      ["i32.const", 0, "local.set", TT, "block", "loop"], g(TT), g(T), ["i32.ge_u", "br_if", 1],
      zero, ["local.set", S0], zero, ["local.set", S1], zero, ["local.set", S2],
        zero, ["local.set", S3],
      g(R), ["local.set", RP], g(X), g(TT), g(CB), ["i32.mul", "i32.add", "local.set", XP], g(NB),
        ["i32.const", 8, "i32.mul", "local.set", J, "loop"],
      g(RP), ["v128.load", 0, "local.set", RV], dots, add(RP, 16), add(XP, 16), g(J), ["i32.const",
        1, "i32.sub", "local.tee", J, "br_if", 0, "end"],
      stores, add(TT, 4), ["br", 0, "end", "end"], add(O, 1), ["br", 0, "end", "end"]);
    return { name: q4 ? "q4mm" : "q8mm", params: 8, locals: [[8, I32], [9, V128]], code: code };
  }

  /* ------------------------------------------------------------------ the accelerator */
  var BYTES = null;
  function bytes() { if (!BYTES) BYTES = module([matvec(true), matvec(false), matmat(true),
    matmat(false)]); return BYTES; }
  function supported() {
    try { return typeof WebAssembly === "object" && WebAssembly.validate(bytes());
      } catch (e) { return false; }
  }
  function create(memory, base) {
    if (window.attnlibNoWasm || !supported()) return null;
    var K = new WebAssembly.Instance(new WebAssembly.Module(bytes()),
      { env: { mem: memory } }).exports;
    base = Math.ceil(base / 16) * 16;
    if (memory.buffer.byteLength < base + SCRATCH) throw new Error("the memory has no room after " +
      "the file for the products' scratch space");
    var F16 = base, X = F16 + (1 << 18), Y = X + (2 << 20), R = Y + (4 << 20),
      FX = 2 << 18, FY = 4 << 18;
    var tab = new Float32Array(memory.buffer, F16, 65536), half = window.attnlibWeights.half;
    for (var h = 0; h < 65536; h++) tab[h] = half(h);
    var x32 = new Float32Array(memory.buffer, X, FX), y32 = new Float32Array(memory.buffer, Y, FY);
    /* the T rows of X (cols each) into wasm memory, in plane order for Q4_1; the sums per block */
    function put(Xs, t0, n, cols, plane) {
      var nb = cols / 32;
      for (var t = 0; t < n; t++) {
        var src = (t0 + t) * cols, dst = t * cols;
        for (var b = 0; b < nb; b++) {
          var i = b * 32;
          if (!plane) { for (var j = 0; j < 32; j++) x32[dst + i + j] = Xs[src + i + j]; continue; }
          for (var k = 0; k < 8; k++) for (var l = 0; l < 4; l++) x32[dst + i + 4 * k + l] =
            Xs[src + i + 4 * l + (k >> 1) + 16 * (k & 1)];
        }
      }
      for (var z = n * cols; z < Math.ceil(n / 4) * 4 * cols; z++) x32[z] = 0; /*
         padding to four tokens */
    }
    function product(q4) {
      return function (offset, rows, cols, Xs, T) {
        var nb = cols / 32, Yd = new Float64Array(T * rows), chunk = Math.max(1,
          Math.min(Math.floor(FX / cols / 4) * 4, Math.floor(FY / rows / 4) * 4));
        if (T === 1) {
          put(Xs, 0, 1, cols, q4);
          if (q4) for (var b = 0; b < nb; b++) { var z = 0; for (var j = 0; j < 32;
            j++) z += Xs[b * 32 + j]; x32[FX - nb + b] = z; }
          K[q4 ? "q4mv" : "q8mv"](offset, rows, nb, X, X + 4 * (FX - nb), Y, F16);
          for (var o = 0; o < rows; o++) Yd[o] = y32[o];
          return Yd;
        }
        if (chunk < 4) throw new Error("a matrix of " + rows + " x " + cols +
          " is too large for the products' scratch space");
        for (var t0 = 0; t0 < T; t0 += chunk) {
          var n = Math.min(chunk, T - t0), n4 = Math.ceil(n / 4) * 4;
          put(Xs, t0, n, cols, q4);
          K[q4 ? "q4mm" : "q8mm"](offset, rows, nb, X, n4, Y, F16, R);
          for (var i = 0; i < n * rows; i++) Yd[t0 * rows + i] = y32[i];
        }
        return Yd;
      };
    }
    return { q4_1: product(true), q8_0: product(false), kind: "wasm-simd" };
  }

  return { create: create, supported: supported, SCRATCH: SCRATCH, bytes: bytes };
})();

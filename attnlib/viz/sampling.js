/* attnlib's sampler in the page: the distribution a next token is drawn from (temperature, top-k,
   top-p, as attnlib.sample_next), a seeded random draw, softmax and argmax. No DOM, no network;
   defines window.attnlibSampling once (every live output carries this file). */
window.attnlibSampling = window.attnlibSampling || (function () {
  "use strict";

  function mulberry32(seed) { /* a small seeded PRNG: the same seed gives the
     same draws everywhere */
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
    for (i = 0; i < z.length; i++) { p[i] = z[i] === -Infinity ? 0 :
      Math.exp(z[i] - m); s += p[i]; }
    for (i = 0; i < z.length; i++) p[i] /= s;
    return p;
  }
  function argmax(z) { var b = 0; for (var i = 1; i < z.length;
    i++) if (z[i] > z[b]) b = i; return b; }
  function greedy(z) { var p = new Float64Array(z.length); p[argmax(z)] = 1; return p; }
  /* The distribution a sampler draws from, as attnlib's sampler: softmax(z / temperature), only the
     top_k largest logits (ties kept, as attnlib.sample_next), then the smallest set of tokens whose
     probability sums to >= top_p. Temperature 0 is greedy (all mass on the argmax), and so is the
     limit of a vanishing one: where z / temperature overflows (temperature 1e-310, a subnormal),
     softmax would compute Infinity - Infinity = NaN. An infinite temperature is the other limit:
     every token top_k keeps equally likely. top_k reads the logits' own order: dividing by a huge
     temperature rounds them all to one number, and top_k = 1 must still keep only the argmax. */
  function distribution(z, s) {
    var V = z.length, T = s.temperature, i, p;
    if (!(T > 0)) return greedy(z);
    var kth = s.topK > 0 && s.topK < V ? Array.prototype.slice.call(z).sort(function (a, b) {
      return b - a; })[s.topK - 1] : -Infinity;
    var y = new Float64Array(V);
    for (i = 0; i < V; i++) {
      if (z[i] === -Infinity || z[i] < kth) { y[i] = -Infinity; continue; }
      y[i] = T === Infinity ? 0 : z[i] / T;
      if (!isFinite(y[i])) return greedy(z); /* overflow: the limit temperature -> 0 */
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
    for (var i = 0; i < p.length; i++) { if (p[i] > 0) { acc += p[i]; last = i;
      if (u < acc) return i; } }
    return last;
  }

  return { mulberry32: mulberry32, softmax: softmax, argmax: argmax, greedy: greedy, distribution:
    distribution, draw: draw };
})();

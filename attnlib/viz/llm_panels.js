/* attnlib's real LLM in the page, the panels under the lab (llm.js starts them once the model is
   loaded), each an explorer of its own (root div.attnlib-explorer, data-state):
     - the logit lens: the final RMSNorm and the LM head applied to the residual stream after the
       embedding and after every layer, at the position the reader picks;
     - generation one token at a time on the reader's text (temperature, top-k, top-p, seed), each
       step feeding only the new token through the model with the KV cache of the text;
     - a chat: the conversation in the model's own template, the reply streamed token by token,
       the cache kept from one step and one turn to the next.
   Defines window.attnlibLLMPanels once; all arithmetic is the runner's (live_model.js). */
window.attnlibLLMPanels = window.attnlibLLMPanels || function (api) {
  "use strict";
  var K = window.attnlibKit, R = window.attnlibSampling, P = api.P, c = api.c, tok = api.tok,
    model = api.model, div = K.div;
  var last = api.root;
  function panel(cls, title, label) {
    var r = div("attnlib-explorer attnlib-kit attnlib-llm-panel " + cls);
    r.setAttribute("data-attnlib-ready", "1"); r.setAttribute("role", "group");
    r.setAttribute("aria-label", label); r.setAttribute("data-state", "");
    last.parentNode.insertBefore(r, last.nextSibling);
    last = r;
    div("attnlib-title", r, title);
    K.keepKeys(r);
    return r;
  }
  function S() { return api.state(); }
  function fmtP(p) { return p >= 0.005 ? p.toFixed(2) : p > 0 ? p.toExponential(0) : "0"; }
  function later(fn) { requestAnimationFrame(function () { setTimeout(fn, 0); }); }

  /* ================================================================ the logit lens */
  var A = { root: panel("attnlib-llm-lens", "Logit lens: what the model would say after each layer",
    "logit lens"), pos: -1, follow: -1 };
  div("attnlib-lab-how", A.root, "Each row applies the final RMSNorm and the LM head " +
    "to the residual stream after the embedding and after each layer, at one position of " +
    "your text; the last row is the model's real prediction. " +
    "Click a token to follow its probability down the rows.");
  var Actl = div("attnlib-controls", A.root);
  var Arange = K.slider(Actl, "position", { label: "position whose prediction the lens shows",
    text: function (v) { var s = S(); return s.ids[v] === undefined ? "" :
      K.quoted(tok.piece(s.ids[v])) + " (" + v + ")"; },
    oninput: function (v) { A.pos = v; A.follow = -1; paintLens(); } });
  var Atab = div("attnlib-llm-lenswrap", A.root), Anote = div("attnlib-lab-note", A.root);
  api.showLens = function (pos) { var n = S().ids.length; A.pos = pos < 0 ? n + pos : pos;
    A.follow = -1; paintLens(); };

  function paintLens() {
    var s = S(), n = s.ids.length;
    Atab.textContent = ""; Anote.textContent = "";
    if (!n || !s.resid) { A.root.setAttribute("data-state", "ids=none"); return; }
    if (A.pos < 0 || A.pos >= n) A.pos = n - 1;
    Arange.max = String(n - 1); Arange.show(A.pos);
    /* the residual stream at this position after the embedding and each layer: (L + 1, C) rows */
    var rows = s.resid.length, X = new Float64Array(rows * c.C);
    for (var k = 0; k < rows; k++) X.set(s.resid[k].subarray(A.pos * c.C,
      (A.pos + 1) * c.C), k * c.C);
    var probs = model.lens(X, rows).map(R.softmax), tops = probs.map(function (p) {
      return api.topk(p, 3); });
    var follow = A.follow >= 0 ? A.follow : tops[rows - 1][0];
    var table = div("attnlib-llm-lens-table", Atab, undefined, "table"), head = div("",
      div("", table, undefined, "thead"), undefined, "tr");
    ["after", "1st", "2nd", "3rd", K.quoted(tok.piece(follow))].forEach(function (t) { div("", head,
      t, "th").scope = "col"; });
    var tb = div("", table, undefined, "tbody");
    probs.forEach(function (p, k) {
      var tr = div("", tb, undefined, "tr");
      div("", tr, k === 0 ? "embedding" : "layer " + (k - 1) + (k === rows - 1 ? " = output" :
        ""), "th").scope = "row";
      tops[k].concat([follow]).forEach(function (id, j) {
        var v = p[id], td = div("attnlib-llm-lenscell", tr, (j < 3 ? K.shown(tok.piece(id),
          10) + " " : "") + fmtP(v), "td");
        td.setAttribute("data-value", v.toFixed(6)); td.setAttribute("data-token", String(id));
        td.style.background = K.colour(api.palette, v, 0, 1);
        td.style.color = K.isDark(K.colour(api.palette, v, 0, 1)) ? "#fff" : "#000";
        td.title = (k === 0 ? "embedding" : "layer " + (k - 1)) + ": " + K.quoted(tok.piece(id)) +
          " probability " + v.toFixed(4);
        if (j < 3) { td.tabIndex = 0; td.addEventListener("click", function () { A.follow = id;
          paintLens(); }); td.addEventListener("keydown", function (e) { if (e.key === "Enter") {
          A.follow = id; paintLens(); } }); }
      });
    });
    /* from which layer on the followed token stays the most likely (the logit
       lens's usual question) */
    var from = rows;
    while (from > 0 && tops[from - 1][0] === follow) from--;
    var where = from === rows ? "is not the most likely token at the output" : from === rows - 1 ?
      "is the most likely token only at the output" : "is the most likely token from " +
      (from === 0 ? "the embedding" : "layer " + (from - 1)) + " on";
    div("", Anote, K.quoted(tok.piece(follow)) + " " + where +
      "; its probability after the last three layers: " + probs.slice(-3).map(function (p) {
      return fmtP(p[follow]); }).join(" \u2192 ") + ".");
    A.root.setAttribute("data-state", ["n=" + n, "pos=" + A.pos, "follow=" + follow,
      "off=" + (api.offList().join(",") || "none")].join(";"));
  }

  /* ================================================================
     generation on the reader's text */
  var G = { root: panel("attnlib-llm-gen", "Generate, one token at a time", "generate") };
  div("attnlib-lab-how", G.root, "Each step draws the next token from the probabilities shown " +
    "above (reshaped by temperature, top-k and " + "top-p; temperature 0 always takes the most " +
    "likely) and feeds only that token through the model: every layer appends a key and a " +
    "value for each of its " + c.G + " key/value heads to the KV cache of your text, and " +
    "the attention views above grow by one row.");
  var Gctl = div("attnlib-controls", G.root), refused = div("attnlib-invalid-note", G.root);
  refused.style.display = "none";
  var sampling = {};
  function number(name, key, min, max, step, whole, hint) {
    var box = K.numberBox(K.control(Gctl, name), { cls: "attnlib-live-num", label: name,
      value: P.sampling[key], min: min, max: max,
      step: step, whole: whole, title: hint, note: refused, onvalue: function (x) {
        sampling[key] = x; if (key === "seed") rng = R.mulberry32(x); paintGen(); } });
    sampling[key] = P.sampling[key];
    return box;
  }
  number("temperature", "temperature", 0, 5, 0.1, false,
    "0 = greedy (always the most likely token)");
  number("top-k", "topK", 0, c.V, 1, true, "keep only the k most likely tokens (0 = all)");
  number("top-p", "topP", 0.01, 1, 0.05, false,
    "keep the fewest tokens whose probability sums to p (1 = all)");
  number("seed", "seed", 0, 4294967295, 1, true, "the random draws start again from this seed");
  var rng = R.mulberry32(P.sampling.seed);
  var Gbtn = div("attnlib-controls", G.root);
  var one = K.button("attnlib-llm-step", Gbtn, "next token \u25b8", "generate the next token",
    function () { generate(1); });
  var eight = K.button("attnlib-llm-many", Gbtn, "+8 tokens \u25b8\u25b8", "generate 8 tokens",
    function () { generate(8); });
  var back = K.button("attnlib-llm-reset", Gbtn, "reset to your text",
    "drop the generated tokens", function () {
    api.compute(function () { var s = S(); s.ids = s.ids.slice(0,
      s.nPrompt); s.gen = 0; rerun(); });
  });
  var Gout = div("attnlib-live-out", G.root), Gnote = div("attnlib-lab-note", G.root);
  function rerun() { /* the text again through the model (after a reset) */
    var s = S(), r = model.forward(s.ids, api.offArg(), { resid: true });
    s.logits = r.logits; s.att = r.att; s.resid = r.resid; s.cache = r.cache; api.changed();
  }
  /* n steps, one per frame (the page shows each token as it comes) */
  function generate(n) {
    var s = S(), done = 0, ms = [];
    if (!s.cache || s.busy) return;
    s.busy = true; api.paintState(); one.disabled = eight.disabled = back.disabled = true;
    function stepOnce() {
      if (done >= n || s.ids.length >= P.labTokens) { finish(); return; }
      var p = R.distribution(s.logits[s.logits.length - 1], sampling), id = R.draw(p,
        rng()), t = performance.now();
      var o = s.cache.feed([id], { resid: true }); /* ONE token in; each layer appends
         one K row and one V row */
      ms.push(performance.now() - t);
      s.ids.push(id); s.logits.push(o.logits[0]); s.gen++; done++;
      for (var l = 0; l < c.L; l++) for (var h = 0; h < c.H; h++) s.att[l][h].push(o.att[l][h][0]);
      s.resid = s.resid.map(function (x, k) { var y = new Float64Array(x.length + c.C); y.set(x);
        y.set(o.resid[k], x.length); return y; });
      api.changed();
      later(stepOnce);
    }
    function finish() {
      s.busy = false; G.ms = ms; paintGen(); api.paintState();
    }
    later(stepOnce);
  }
  function paintGen() {
    var s = S(), n = s.ids.length;
    one.disabled = eight.disabled = !s.cache || s.busy || n >= P.labTokens;
    back.disabled = s.busy || !s.gen;
    Gout.textContent = "";
    if (!n) { G.root.setAttribute("data-state", "ids=none"); return; }
    div("attnlib-live-label", Gout, "Text so far (" + n + " of " +
      P.labTokens + " tokens): ", "span");
    div("", Gout, tok.decode(s.ids.slice(0, s.nPrompt)), "span");
    var g = div("attnlib-live-gentok", Gout, tok.decode(s.ids.slice(s.nPrompt)), "span");
    g.setAttribute("data-ids", s.ids.slice(s.nPrompt).join(","));
    Gnote.textContent = s.gen && G.ms && G.ms.length ? "The last step fed 1 token through all " +
      c.L + " layers in " + G.ms[G.ms.length - 1].toFixed(0) +
      " ms; the KV cache holds " + s.cache.n + " tokens (" + api.mb(s.cache.nbytes()) +
        ": 2 \u00d7 " + c.L + " layers \u00d7 " + c.G + " heads \u00d7 " +
      c.D + " numbers \u00d7 4 bytes per token)." : "";
    G.root.setAttribute("data-state", ["n=" + n, "generated=" + s.gen,
      "temperature=" + sampling.temperature, "top_k=" + sampling.topK, "top_p=" + sampling.topP,
      "seed=" + sampling.seed, "busy=" + (s.busy ? 1 : 0)].join(";"));
  }

  /* ================================================================ the chat */
  var C = { root: panel("attnlib-llm-chat", "Chat with " + P.shortName, "chat"), cache: null,
    msgs: [], reply: [], busy: false };
  div("attnlib-lab-how", C.root, "Your message goes into the model's own chat template, " +
    (tok.hasChat ? "the ChatML template (chapter 16)" : "one the page cannot render") +
    ", and the reply comes one token at a time with the sampling settings above. The KV cache " +
      "of the conversation is kept, so a next turn " +
    "feeds only its new tokens; that cache is built with the heads switched off when the " +
    "chat starts, so switching heads changes the chat only after \u201cnew chat\u201d.");
  var log = div("attnlib-llm-log", C.root), Cctl = div("attnlib-llm-ask", C.root);
  var ask = div("attnlib-llm-question", Cctl, undefined, "textarea");
  ask.rows = 2; ask.value = P.question; ask.setAttribute("aria-label", "your message");
  var send = K.button("attnlib-llm-send", Cctl, "send", "send your message",
    function () { chat(); });
  var fresh = K.button("attnlib-llm-newchat", Cctl, "new chat", "start a new conversation",
    function () { C.cache = null; C.msgs = []; paintChat(); });
  var Cnote = div("attnlib-lab-note", C.root);
  Cnote.setAttribute("role", "status");
  if (!tok.hasChat) send.disabled = true;
  function chat() {
    var text = ask.value;
    if (C.busy || !text.trim()) { if (!text.trim()) Cnote.textContent =
      "Type a message first."; return; }
    /* the new tokens: the whole template for a first turn; else the end of the last
       reply and the new turn */
    var ids;
    if (!C.cache) { C.cache = model.cache(api.offArg());
      ids = tok.chat([{ role: "user", content: text }]); }
    else ids = [tok.eos].concat(tok.encode("\n<|im_start|>user\n" + text +
      "<|im_end|>\n<|im_start|>assistant\n")); /* <|im_end|> closes the reply */
    if (C.cache.n + ids.length + 1 > P.chatTokens) { Cnote.textContent = "The conversation is " +
      "full (" + P.chatTokens + " tokens in this page): start a new chat."; return; }
    C.msgs.push({ role: "user", content: text }, { role: "assistant", content: "" });
    C.reply = []; C.busy = true; ask.value = ""; paintChat();
    Cnote.textContent = "Reading your message (" + ids.length + " tokens) \u2026";
    later(function () {
      var t0 = performance.now(), z = C.cache.feed(ids, { noAtt: true }).logits[0],
        t1 = performance.now(), shown = "";
      C.prefill = { tokens: ids.length, ms: t1 - t0 };
      function next() {
        var id = R.draw(R.distribution(z, sampling), rng());
        var ended = id === tok.eos;
        if (ended || C.reply.length >= P.replyTokens || C.cache.n >=
          P.chatTokens) { done(ended); return; }
        C.reply.push(id);
        var txt = tok.decode(C.reply);
        if (txt.slice(-1) !== "\ufffd") shown = txt; /* a character split over tokens:
           wait for its last byte */
        C.msgs[C.msgs.length - 1].content = shown;
        paintChat();
        z = C.cache.feed([id], { noAtt: true }).logits[0];
        later(next);
      }
      function done(ended) {
        var t = (performance.now() - t1) / 1000;
        C.msgs[C.msgs.length - 1].content = tok.decode(C.reply);
        C.busy = false; C.stats = { tokens: C.reply.length, s: t };
        Cnote.textContent = "Your message: " + C.prefill.tokens + " tokens in " + (C.prefill.ms /
          1000).toFixed(2) + " s; the reply: " + C.reply.length +
          " tokens in " + t.toFixed(1) + " s (" + (C.reply.length / Math.max(t, 1e-3)).toFixed(1) +
            " tokens/s)" + (ended ? "" : ", cut at the limit") +
          ". The cache holds " + C.cache.n + " tokens (" +
            api.mb(C.cache.nbytes()) + ") for the next turn.";
        paintChat();
      }
      next();
    });
  }
  function paintChat() {
    log.textContent = "";
    C.msgs.forEach(function (m, i) {
      var line = div("attnlib-llm-msg-" + m.role, log);
      div("attnlib-live-label", line, m.role === "user" ? "you: " : P.shortName + ": ", "span");
      var t = div("attnlib-llm-said", line, m.content || (C.busy && i === C.msgs.length - 1 ?
        "\u2026" : ""), "span");
      if (m.role === "assistant" && i === C.msgs.length - 1) t.setAttribute(
        "data-ids", C.reply.join(","));
    });
    send.disabled = C.busy || !tok.hasChat; fresh.disabled = C.busy || !C.msgs.length;
    if (!C.msgs.length) Cnote.textContent = "";
    C.root.setAttribute("data-state", ["turns=" + C.msgs.length / 2, "reply=" + C.reply.length,
      "cache=" + (C.cache ? C.cache.n : 0), "busy=" + (C.busy ? 1 : 0)].join(";"));
  }

  var lastIds = "";
  api.onChange(function () {
    var now = S().ids.join(",");
    if (now !== lastIds) { A.pos = -1; A.follow = -1; lastIds = now; }
    paintGen();
    later(paintLens); /* after the probabilities are on screen: the lens costs the
       LM head once per layer */
  });
  api.onIdle(paintGen);
  paintGen(); paintChat();
};

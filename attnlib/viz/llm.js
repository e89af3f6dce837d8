/* attnlib's real LLM in the page: SmolLM2-135M-Instruct run by the live model's runner
   (live_model.js, on the shared attention engine) from the book's own GGUF file, fetched only when
   the reader clicks the button that names it and its size. Then, with no kernel and no network:
   the reader's text as tokens (bpe.js, the file's byte-level BPE), the next-token probabilities,
   the attention of any layer and head over those tokens, every head of a layer at once, head
   switches; llm_panels.js adds the logit lens, generation with the KV cache, and a chat.
   The weights stay in the file's buffer as Q4_1 / Q8_0 blocks (weights.js, gguf.js).
   Every string from the payload, the file or the reader reaches the page through textContent /
   setAttribute (escaped). No globals of its own, no eval. */
(function () {
  "use strict";
  var K = window.attnlibKit, M = window.attnlibLiveModel, R = window.attnlibSampling,
    GG = window.attnlibGGUF, B = window.attnlibBPE;
  var WA = window.attnlibWasm;
  var div = K.div, quoted = K.quoted, MB = 1e6;

  function hashIds(ids) { var h = 2166136261; for (var i = 0; i < ids.length; i++) h = Math.imul(h ^
    (ids[i] + 1), 16777619) >>> 0; return h.toString(16); }
  function mb(n) { return (n / MB).toFixed(n < 10 * MB ? 1 : 0) + " MB"; }
  /* run fn after the browser has painted (a "computing" note shows before a long computation) */
  function later(fn) { requestAnimationFrame(function () { setTimeout(fn, 0); }); }

  function init(root, P) {
    var uid = K.uid(root), palette = K.palette(P.palette);
    div("attnlib-title", root, P.title);
    div("attnlib-llm-intro", root, "The button downloads the model's file from this book's own " +
      "files. After that, the real " + P.modelName + " runs inside this tab: your browser does " +
      "all of the model's arithmetic, no server or Python takes part, and nothing you type is " +
      "sent anywhere. The weights stay as the file stores them: the matrices in blocks of " +
        "4-bit and 8-bit numbers.");
    var need = div("attnlib-llm-need", root, needs());
    var loadRow = div("attnlib-controls", root);
    var loadBtn = K.button("attnlib-llm-load", loadRow, "Load " + P.shortName + " (" +
      Math.round(P.fileBytes / MB) + " MB)", null, function () { load(); });
    loadBtn.title = "Fetch " + P.fileName + " (" + P.fileBytes.toLocaleString("en") +
      " bytes) from the book's files; nothing is fetched before you click";
    var bar = div("attnlib-llm-progress", loadRow, undefined, "progress");
    bar.max = 1; bar.value = 0; bar.style.display = "none";
    bar.setAttribute("aria-label", "loading " + P.fileName);
    var loaded = div("attnlib-llm-loaded", root), status = div("attnlib-llm-status", root);
    status.setAttribute("role", "status"); status.setAttribute("aria-live", "polite");
    var pick = div("attnlib-llm-pick", root, undefined, "label");
    div("", pick, "Or open " + P.fileName + " from your disk: ", "span");
    var fileIn = div("", pick, undefined, "input");
    fileIn.type = "file"; fileIn.accept = ".gguf";
    pick.style.display = "none";
    fileIn.addEventListener("change", function () {
      if (fileIn.files && fileIn.files[0]) readFile(fileIn.files[0]); });
    var lab = div("attnlib-llm-lab", root);
    root.setAttribute("data-state", "loaded=0");

    /* what the page needs from the browser; said before the reader clicks */
    function needs() {
      var missing = [];
      if (typeof fetch === "undefined" || typeof TextDecoder === "undefined") missing.push(
        "fetch and TextDecoder");
      if (typeof BigInt === "undefined" || !DataView.prototype.getBigInt64) missing.push(
        "64-bit integers (BigInt)");
      try { new RegExp("\\p{L}", "u"); } catch (e) { missing.push("Unicode regular expressions"); }
      if (missing.length) return "This browser lacks " + missing.join(", ") +
        ", which the lab needs: use a browser from 2020 or later.";
      var mem = navigator.deviceMemory, small = mem && mem < 2;
      // measured (benchmarks.smollm2_browser): the model adds about 2.25 times its file to the tab
      return "It needs about " + Math.round(2.25 * P.fileBytes / MB / 10) * 10 +
        " MB of free memory in the tab" + (small ? " (this device reports " + mem +
        " GB in all: it may fail)" : "") + ".";
    }
    function say(lines, bad) {
      status.textContent = "";
      (typeof lines === "string" ? [lines] : lines).forEach(function (l) { div("", status, l); });
      status.className = "attnlib-llm-status" + (bad ? " attnlib-llm-bad" : "");
    }

    /* ---- loading: fetch with progress (or a file from the disk), then parse ---- */
    var T0 = 0, timing = {};
    function load() {
      loadBtn.disabled = true; bar.style.display = ""; bar.value = 0;
      T0 = performance.now();
      var url = new URL(P.src, document.baseURI).href;
      say("Fetching " + P.fileName + " \u2026");
      fetch(url).then(function (res) {
        if (!res.ok) throw new Error("the server answered " + res.status + " " + res.statusText);
        var total = +res.headers.get("Content-Length") || P.fileBytes;
        if (!res.body || !res.body.getReader) return res.arrayBuffer().then(function (ab) {
          return place(new Uint8Array(ab)); });
        var reader = res.body.getReader(), buf = target(total), got = 0;
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) return got === total ? buf : place(buf.subarray(0, got));
            if (got + r.value.length > buf.length) {
              var b2 = new Uint8Array(Math.max(2 * buf.length, got + r.value.length));
              b2.set(buf.subarray(0, got)); buf = b2; mem = null; }
            buf.set(r.value, got); got += r.value.length;
            bar.value = Math.min(1, got / total);
            say("Fetching " + P.fileName + ": " + mb(got) + " of " + mb(total));
            return pump();
          });
        }
        return pump();
      }).then(function (bytes) { timing.fetch = performance.now() - T0; ready(bytes);
      }).catch(function (e) { failed(url, e); });
    }
    /* Where the file's bytes go: with WebAssembly SIMD, into a WebAssembly memory with room after
       them for the products' scratch space (wasm.js computes there, on the file itself); else into
       a plain buffer. Either way the tab holds one copy of the file, never float32 weights. */
    var mem = null;
    function target(n) {
      mem = null;
      if (WA && WA.supported() && !window.attnlibNoWasm) {
        try { mem = new WebAssembly.Memory({ initial: Math.ceil((n + WA.SCRATCH + 64) / 65536) });
          return new Uint8Array(mem.buffer, 0, n); }
        catch (e) { mem = null; } /* no room for it (a phone): the plain path needs less */
      }
      try { return new Uint8Array(n); } catch (e) { throw new Error("the tab could not get " +
        mb(n) + " of memory for the model (" + e.message + ")"); }
    }
    function place(bytes) { var b = target(bytes.length); b.set(bytes); return b; }
    function readFile(file) {
      T0 = performance.now(); bar.style.display = ""; bar.value = 0; loadBtn.disabled = true;
      say("Reading " + file.name + " from your disk \u2026");
      file.arrayBuffer().then(function (ab) { timing.fetch = performance.now() - T0; bar.value = 1;
        ready(place(new Uint8Array(ab))); })
        .catch(function (e) { failed(file.name, e); });
    }
    function failed(where, e) {
      loadBtn.disabled = false; bar.style.display = "none";
      say(["Could not load the model from " + where + ": " + (e && e.message ? e.message : e) + ".",
        "The book's build puts " + P.fileName + " next to its pages. Where this page is not " +
          "served from the book " +
        "(JupyterLab, Colab, a page opened as a file), run this notebook's Python cells, which " +
          "compute the same numbers " +
        "with attnlib, or open the file from your disk below (Python prints its path: " +
          "attnlib.pretrained.smollm2_path())."], true);
      pick.style.display = "";
      root.setAttribute("data-state", "loaded=failed");
    }
    var S = null; /* the lab's state once the model is in */
    function ready(bytes) {
      bar.value = 1;
      say("Reading the file's header \u2026");
      later(function () {
        var t1 = performance.now(), f, tok, m, acc = null;
        try {
          f = GG.parse(bytes.buffer, bytes.length);
          tok = B.tokenizer(f.meta);
          if (mem) acc = WA.create(mem, bytes.length);
          m = GG.llama(f, P.chatTokens, acc);
        } catch (e) { failed("the file", e); return; }
        timing.accel = acc ? acc.kind : "javascript";
        timing.parse = performance.now() - t1; timing.load = performance.now() - T0;
        loadBtn.style.display = "none"; bar.style.display = "none"; pick.style.display = "none";
        need.style.display = "none";
        start(f, tok, m, bytes.length);
      });
    }

    /* ---- the lab ---- */
    function start(f, tok, mw, fileBytes) {
      var model = M.model(mw.config, mw.weights), c = model.config;
      S = { ids: [], nPrompt: 0, logits: null, att: null, resid: null, cache: null, layer: 0,
        head: 0, off: allOn(), busy: false, gen: 0, tok: tok, model: model, c: c,
        fileBytes: fileBytes, ms: 0 };
      loaded.textContent = ("Loaded in " + (timing.load / 1000).toFixed(1) + " s (fetch " +
        (timing.fetch / 1000).toFixed(1) + " s, header " +
        (timing.parse / 1000).toFixed(2) + " s): " + c.L + " layers, " + c.H +
          " query heads sharing " + c.G + " key/value heads, width " + c.C +
        ", vocabulary " + c.V.toLocaleString("en") + ". Matrix products run in " +
          (timing.accel === "javascript" ? "plain JavaScript" :
          "WebAssembly (fast vector instructions)") +
        ". Layers and heads are counted from 0, as in chapter 16.");
      say("");
      function allOn() { var o = []; for (var l = 0; l < mw.config.L; l++) { o.push([]);
        for (var h = 0; h < mw.config.H; h++) o[l].push(1); } return o; }
      function offList() { var o = []; S.off.forEach(function (r, l) { r.forEach(function (v, h) {
        if (!v) o.push(l + "." + h); }); }); return o; }
      function offArg() { return offList().length ? S.off : null; }

      var inputLab = div("attnlib-llm-input", lab, undefined, "label");
      div("", inputLab, "Your text (the lab reads up to " + P.labTokens + " tokens)", "span");
      var input = div("attnlib-llm-text", inputLab, undefined, "textarea");
      input.rows = 2; input.spellcheck = false; input.value = P.prompt;
      input.setAttribute("autocomplete", "off");
      var msg = div("attnlib-llm-msg", lab);
      msg.setAttribute("role", "status");
      var strip = div("attnlib-llm-tokens", lab), body = div("attnlib-body", lab);
      var probsBox = div("attnlib-llm-probs", body);
      var attBox = div("attnlib-llm-att", lab), controls = div("attnlib-controls", attBox);
      var layerR = K.slider(controls, "layer", { max: c.L - 1, text: String, oninput: function (v) {
        S.layer = v; paintAll(); } });
      var headR = K.slider(controls, "head", { max: c.H - 1, text: String, oninput: function (v) {
        S.head = v; paintAtt(); paintGrid(); } });
      var fig = div("attnlib-figure", attBox), tip = K.tip(lab);
      var gridBox = div("attnlib-llm-grid", attBox);
      var swBox = div("attnlib-llm-switches", lab);
      var listeners = [], idle = [], timer = null;

      function setMsg(lines) { msg.textContent = ""; lines.forEach(function (l) { div("", msg, l);
        }); msg.style.display = lines.length ? "" : "none"; }
      /* the text through the model: prefill on a fresh cache (the cache then serves generation) */
      function run(ids) {
        var t = performance.now(), r = model.forward(ids, offArg(), { resid: true });
        S.ms = performance.now() - t;
        S.ids = ids.slice(); S.logits = r.logits; S.att = r.att; S.resid = r.resid;
        S.cache = r.cache; S.gen = 0;
      }
      function restart() {
        var ids = tok.encode(input.value), lines = [];
        if (ids.length > P.labTokens) { lines.push("Your text has " + ids.length + " tokens; the " +
          "lab reads the first " + P.labTokens + "."); ids = ids.slice(0, P.labTokens); }
        if (!ids.length) lines.push("Type some text: the model needs at least one token.");
        setMsg(lines);
        S.nPrompt = ids.length;
        if (ids.length) run(ids); else { S.ids = []; S.logits = null; S.att = null;
          S.resid = null; S.cache = null; }
        changed();
      }
      function compute(fn) { /* a long computation, with a note and
         data-state busy=1 while it runs */
        S.busy = true; paintState();
        say("Computing \u2026");
        later(function () {
          try { fn(); } catch (e) { setMsg(["The computation failed: " + e.message]); }
          S.busy = false;
          if (S.typedAt) { timing.answer = performance.now() - S.typedAt;
            timing.answerTokens = S.ids.length; S.typedAt = 0; }
          timing.forward = S.ms;
          idle.forEach(function (g) { g(); });
          say(S.ids.length ? "The text's " + S.ids.length + " tokens went through the model in " +
            (S.ms / 1000).toFixed(2) + " s." + memoryNote() : "");
          paintState();
        });
      }
      function memoryNote() {
        var kv = S.cache ? S.cache.nbytes() : 0, heap = performance.memory ?
          performance.memory.usedJSHeapSize : 0;
        return " The tab holds the file (" + mb(S.fileBytes) +
          ": the weights as stored, no float32 copy)" + (kv ? ", a KV cache of " + mb(kv) : "") +
          (heap ? "; JavaScript heap " + mb(heap) : "") + ".";
      }
      /* typing: wait for a short pause (120 ms), then the text goes through
         the model; timing.answer is
         the time from the last keystroke to the probabilities on screen */
      input.addEventListener("input", function () {
        S.typedAt = performance.now();
        clearTimeout(timer); timer = setTimeout(function () { compute(restart); }, 120);
      });

      function changed() { paintAll(); listeners.forEach(function (fn) { fn(); }); }
      function paintAll() { paintTokens(); paintProbs(); paintAtt(); paintGrid();
        paintSwitches(); paintState(); }
      function paintState() {
        root.setAttribute("data-state", ["loaded=1", "ids=" + hashIds(S.ids), "n=" + S.ids.length,
          "generated=" + S.gen, "layer=" + S.layer, "head=" + S.head,
          "off=" + (offList().join(",") || "none"), "busy=" + (S.busy ? 1 : 0)].join(";"));
      }

      function paintTokens() {
        strip.textContent = "";
        div("attnlib-live-label", strip, S.ids.length + " tokens: ", "span");
        S.ids.forEach(function (id, i) {
          var sp = div("attnlib-llm-tok" + (i >= S.nPrompt ? " attnlib-live-gentok" : ""), strip,
            K.shown(tok.piece(id)), "span");
          sp.title = "token " + i + ": id " + id;
        });
        strip.setAttribute("data-ids", S.ids.join(","));
      }
      function paintProbs() {
        probsBox.textContent = "";
        if (!S.logits) return;
        var p = R.softmax(S.logits[S.logits.length - 1]), top = topk(p, 10);
        div("attnlib-bars-head", probsBox,
          "Next token after " + quoted(tok.piece(S.ids[S.ids.length - 1])) + (offList().length ?
          " (heads off: " + offList().length + ")" : ""));
        top.forEach(function (id) {
          var row = div("attnlib-bar", probsBox);
          row.setAttribute("data-token", String(id)); row.setAttribute("data-p", p[id].toFixed(6));
          div("attnlib-bar-token", row, K.shown(tok.piece(id), 12)).title =
            quoted(tok.piece(id)) + ", id " + id;
          var fill = div("attnlib-bar-fill", div("attnlib-bar-track", row));
          fill.style.width = (100 * p[id]).toFixed(1) + "%"; fill.style.background =
            K.colour(palette, p[id], 0, 1);
          div("attnlib-bar-value", row, p[id].toFixed(2)).title = "probability " + p[id].toFixed(4);
        });
      }
      function topk(p, k) {
        var idx = [];
        for (var i = 0; i < p.length; i++) {
          if (idx.length < k || p[i] > p[idx[idx.length - 1]]) {
            idx.push(i); idx.sort(function (a, b) { return p[b] - p[a] || a - b; });
            if (idx.length > k) idx.pop();
          }
        }
        return idx;
      }
      /* the attention of the chosen layer and head over the tokens: query rows, key columns */
      function weight(l, h, i, j) { var r = S.att[l][h][i]; return j < r.length ? r[j] : 0; }
      function paintAtt() {
        fig.textContent = ""; tip.hide();
        if (!S.att) return;
        var T = S.ids.length, labels = S.ids.map(function (id) { return tok.piece(id); });
        K.heatmap({ parent: fig, avail: K.width(lab) - 70, rows: labels, cols: labels,
          palette: palette, lo: 0, hi: 1, digits: 4, cellMax: 30, cellMin: 4, rowTitle: "query",
          colTitle: "key", hatchId: "attnlib-hatch-llm-" + uid,
          label: "attention weights of layer " + S.layer + ", head " + S.head + ": " + T +
            " queries by " + T + " keys",
          value: function (i, j) { return weight(S.layer, S.head, i, j); },
            masked: function (i, j) { return j > i; },
          onHover: function (i, j, rect) {
            tip.show(rect, ["query " + quoted(labels[i]) + " (" + i + ") \u2192 key " +
              quoted(labels[j]) + " (" + j + ")",
              "weight = " + (j > i ? "0 (masked: the future)" : K.fmt(weight(S.layer, S.head, i, j),
                4)), "layer " + S.layer + " \u00b7 head " + S.head +
              (S.off[S.layer][S.head] ? "" :
                " (switched off: it still attends, but writes nothing)")], fig);
          }, onLeave: tip.hide });
        K.colourbar(fig, palette, 0, 1, 120, "weight", "attnlib-grad-llm-" + uid);
      }
      /* every head of the chosen layer, small: click one to show it above */
      function paintGrid() {
        gridBox.textContent = "";
        if (!S.att) return;
        div("attnlib-lab-subhead", gridBox, "All " + c.H + " heads of layer " + S.layer +
          " (click one to show it above)");
        var wrap = div("attnlib-llm-thumbs", gridBox), T = S.ids.length, px = Math.max(1,
          Math.floor(72 / T)), size = px * T;
        for (var h = 0; h < c.H; h++) {
          (function (h) {
            var b = K.button("attnlib-llm-thumb", wrap, undefined, "show layer " + S.layer +
              ", head " + h, function () { S.head = h; headR.show(h); paintAtt();
              paintGrid(); paintState(); });
            K.toggle(b, h === S.head);
            var cv = div("", b, undefined, "canvas"), g = cv.getContext && cv.getContext("2d");
            cv.width = size; cv.height = size; cv.style.width = size + "px";
            cv.style.height = size + "px";
            for (var i = 0; g && i < T; i++) for (var j = 0; j <= i; j++) { g.fillStyle = K.colour(
              palette, weight(S.layer, h, i, j), 0, 1); g.fillRect(j * px, i * px, px, px); }
            div("attnlib-llm-thumbname", b, "head " + h + (S.off[S.layer][h] ?
              "" : " (off)"), "span");
          })(h);
        }
      }
      /* head switches of the chosen layer (pressed = switched off), and every head switched off */
      function setOff(off) { S.off = off; compute(function () { if (S.ids.length) run(S.ids.slice(0,
        S.nPrompt)); changed(); }); }
      function paintSwitches() {
        swBox.textContent = "";
        div("attnlib-lab-subhead", swBox, "Switch heads of layer " + S.layer + " off");
        div("attnlib-lab-how", swBox, "Pressed = switched off: the head's output is set to zero " +
          "(as attnlib.heads_off does), so the rest of the " +
          "network no longer receives it. Every number on this page uses the heads left on.");
        var row = div("attnlib-llm-switchrow", swBox);
        for (var h = 0; h < c.H; h++) {
          (function (l, h) {
            var b = K.button("attnlib-lab-head", row, "",
              "layer " + l + ", head " + h, function () {
              var off = S.off.map(function (r) { return r.slice(); });
              off[l][h] = off[l][h] ? 0 : 1; setOff(off);
            });
            K.toggle(b, !S.off[l][h]);
            K.plate(b, "head " + h); /* readable on the hatch when pressed */
            b.setAttribute("data-layer", l); b.setAttribute("data-head", h);
          })(S.layer, h);
        }
        var o = offList(), line = div("attnlib-lab-note", swBox, o.length ?
          "Switched off (layer.head): " + o.join(", ") + ". " : "Every head is on. ");
        var allOnBtn = K.button("attnlib-lab-allon", line, "all heads on",
          "switch every head back on", function () { setOff(allOn()); });
        allOnBtn.disabled = !o.length;
      }
      if (P.experiments && P.experiments.length) {
        var ex = div("attnlib-lab-experiments", lab);
        div("attnlib-lab-subhead", ex,
          "Try these (the page's Python cells measure them with attnlib)");
        P.experiments.forEach(function (e, n) {
          var row = div("attnlib-lab-experiment", ex);
          div("", row, e.sentence, "p");
          K.button("attnlib-lab-try", row, "set it up", "experiment " + (n + 1) + ": " + e.sentence,
            function () { experiment(e); });
        });
        lab.insertBefore(ex, inputLab);
      }
      function experiment(e) {
        var off = allOn();
        (e.off || []).forEach(function (lh) { off[lh[0]][lh[1]] = 0; });
        if (e.show) { S.layer = e.show[0]; S.head = e.show[1];
          layerR.show(S.layer); headR.show(S.head); }
        if (e.text !== undefined) input.value = e.text;
        S.off = off;
        compute(function () { restart(); if (e.lens !== undefined &&
          api.showLens) api.showLens(e.lens); });
      }

      /* what llm_panels.js (the lens, generation, chat) reads and sets */
      var api = { P: P, root: root, lab: lab, uid: uid, palette: palette, tok: tok, model: model,
        c: c, state: function () { return S; }, offArg: offArg, offList: offList, topk: topk,
        compute: compute, say: say, memoryNote: memoryNote, paintState: paintState,
        onChange: function (fn) { listeners.push(fn); }, onIdle: function (fn) { idle.push(fn); },
          changed: changed, mb: mb };
      if (window.attnlibLLMPanels) window.attnlibLLMPanels(api);
      /* for the tests and the curious: the page's own computations, off[l][h] =
         0 switching a head off */
      root.attnlibLLM = {
        config: c, timing: timing, encode: tok.encode, decode: tok.decode,
          piece: tok.piece, chat: tok.chat,
        probs: function (ids, off) { return Array.from(R.softmax(model.forward(ids, off || null,
          { last: true, noAtt: true }).logits[0])); },
        attention: function (ids, layer, off) {
          return model.forward(ids, off || null, { last: true }).att[layer].map(function (h) {
            return h.map(function (r) { return Array.from(r); }); });
        },
        greedy: function (ids, n, off) { return model.greedy(ids, n, off || null); },
        memory: function () {
          return { file: S.fileBytes, weights: mw.nbytes, cache: S.cache ? S.cache.nbytes() : 0,
            accel: timing.accel, wasmMemory: mem ? mem.buffer.byteLength : 0,
            heap: performance.memory ? performance.memory.usedJSHeapSize : null };
        },
        /* a prefill of ids on a fresh cache, then n greedy steps of one token: the times (ms) and
           the tokens, for benchmarks/smollm2_browser.py */
        bench: function (ids, n) {
          var cache = model.cache(null), t = performance.now(), z = cache.feed(ids,
            { noAtt: true }).logits[0], out = [], steps = [];
          var prefill = performance.now() - t;
          for (var k = 0; k < n; k++) {
            var id = R.argmax(z); out.push(id); t = performance.now();
            z = cache.feed([id], { noAtt: true }).logits[0]; steps.push(performance.now() - t);
          }
          return { prefill: prefill, steps: steps, ids: out, cacheBytes: cache.nbytes() };
        }
      };
      compute(restart);
    }
  }

  K.boot(document.currentScript, "attnlib-llm", init, "LLM lab");
})();

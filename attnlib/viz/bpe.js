/* The tokenizer of a GGUF file in the page: GPT-2's byte-level BPE built from the file's own
   vocabulary, merges and control tokens, token for token what attnlib.GGUFTokenizer (Hugging Face's
   tokenizers library) gives, and the model's chat template. No DOM, no network; defines
   window.attnlibBPE once.

     var tok = attnlibBPE.tokenizer(meta);   meta: a parsed GGUF header (gguf.js)
     tok.encode(text) -> ids        no special tokens added; "<|im_start|>" written out is its id
     tok.decode(ids)  -> text       decode(encode(s)) == s
     tok.piece(id)    -> one token's text for a label (bytes that are no whole character: <F0 9F>)
     tok.chat(messages, addGenerationPrompt) -> ids of the conversation in the model's template
     tok.eos, tok.bos, tok.size, tok.isSpecial(id)

   How text becomes tokens (as the file's "tokenizer.ggml.pre" = "smollm" asks, like llama.cpp):
   control tokens written in the text are cut out first; every digit stands alone; GPT-2's regular
   expression splits the rest into words (a leading space stays with its word); each word's UTF-8
   bytes become 256 printable characters (GPT-2's byte alphabet: "Ġ" is a space); then merges join
   neighbours, always the pair that comes first in the file's merge list, until none applies. */
window.attnlibBPE = window.attnlibBPE || (function () {
  "use strict";
  var WORDS = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
  var DIGIT = /(\p{N})/u;

  /* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + n */
  var BYTE_CHAR = [], CHAR_BYTE = {};
  (function () {
    var n = 0;
    for (var b = 0; b < 256; b++) {
      var printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      BYTE_CHAR[b] = String.fromCharCode(printable ? b : 256 + n++);
      CHAR_BYTE[BYTE_CHAR[b]] = b;
    }
  })();

  function tokenizer(meta) {
    if (meta["tokenizer.ggml.model"] !== "gpt2") {
      throw new Error("the page reads byte-level BPE vocabularies (\u201cgpt2\u201d), this file " +
        "has " + meta["tokenizer.ggml.model"]);
    }
    var tokens = meta["tokenizer.ggml.tokens"], types = meta["tokenizer.ggml.token_type"] || [],
      merges = meta["tokenizer.ggml.merges"];
    var pre = meta["tokenizer.ggml.pre"], digits = pre === "smollm" ||
      pre === "starcoder" || pre === "refact";
    var ids = new Map(), rank = new Map(), special = [], isSpecial = new Uint8Array(tokens.length);
    tokens.forEach(function (t, i) { ids.set(t, i); if (types[i] === 3) {
      special.push(t); isSpecial[i] = 1; } });
    merges.forEach(function (m, i) { rank.set(m, i); });
    special.sort(function (a, b) { return b.length - a.length; }); /* the longest first,
       where two start alike */
    var utf8 = new TextEncoder(), cache = new Map();

    /* one word (its byte characters) -> ids: merge the best-ranked neighbouring
       pair until none is left */
    function bpe(word) {
      var hit = cache.get(word);
      if (hit) return hit;
      var parts = Array.from(word);
      while (parts.length > 1) {
        var best = -1, bestRank = Infinity;
        for (var i = 0; i + 1 < parts.length; i++) {
          var r = rank.get(parts[i] + " " + parts[i + 1]);
          if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
        }
        if (best < 0) break;
        var a = parts[best], b = parts[best + 1], next = [];
        for (i = 0; i < parts.length; i++) {
          if (i + 1 < parts.length && parts[i] === a && parts[i + 1] === b) {
            next.push(a + b); i++; }
          else next.push(parts[i]);
        }
        parts = next;
      }
      var out = parts.map(function (p) {
        var id = ids.get(p);
        if (id === undefined) throw new Error("the vocabulary has no token " +
          "for " + JSON.stringify(p));
        return id;
      });
      if (cache.size < 50000) cache.set(word, out);
      return out;
    }
    function encodePlain(text, out) {
      var pieces = digits ? text.split(DIGIT) : [text];
      pieces.forEach(function (piece) {
        if (!piece) return;
        (piece.match(WORDS) || []).forEach(function (w) {
          var bytes = utf8.encode(w), s = "";
          for (var i = 0; i < bytes.length; i++) s += BYTE_CHAR[bytes[i]];
          Array.prototype.push.apply(out, bpe(s));
        });
      });
    }
    function encode(text) {
      if (typeof text !== "string") throw new Error("encode needs a string, got " + typeof text);
      var out = [], at = 0;
      while (at < text.length) { /* the next control token written in the text, if any */
        var first = -1, which = null;
        for (var k = 0; k < special.length; k++) {
          var j = text.indexOf(special[k], at);
          if (j >= 0 && (first < 0 || j < first)) { first = j; which = special[k]; }
        }
        if (first < 0) { encodePlain(text.slice(at), out); break; }
        if (first > at) encodePlain(text.slice(at, first), out);
        out.push(ids.get(which));
        at = first + which.length;
      }
      return out;
    }
    function bytesOf(list) {
      var b = [];
      list.forEach(function (id) {
        var t = tokens[id];
        if (t === undefined) throw new Error("token id " + id +
          " is not in the vocabulary of " + tokens.length);
        if (isSpecial[id]) { Array.prototype.push.apply(b, Array.from(utf8.encode(t))); return; }
        for (var ch of t) b.push(CHAR_BYTE[ch] !== undefined ? CHAR_BYTE[ch] : 63);
      });
      return new Uint8Array(b);
    }
    function decode(list) { return new TextDecoder("utf-8").decode(bytesOf(list)); }
    function piece(id) {
      var b = bytesOf([id]);
      try { return new TextDecoder("utf-8", { fatal: true }).decode(b); } catch (e) {
        return "<" + Array.from(b).map(function (x) {
          return x.toString(16).toUpperCase().padStart(2, "0"); }).join(" ") + ">";
      }
    }

    /* The chat template is the file's own (tokenizer.chat_template, a Jinja program). The page runs
       no Jinja: it recognises ChatML (each turn "<|im_start|>role\ncontent<|im_end|>\n", then
       "<|im_start|>assistant\n" to open the reply) and reads the template's default system message
       from the file, so the text equals GGUFTokenizer.render_chat's. Another template is refused.
       */
    var template = meta["tokenizer.chat_template"] || "", system = null;
    var chatml = template.indexOf("'<|im_start|>' + message['role'] + '\n' + message['content'] " +
      "+ '<|im_end|>' + '\n'") >= 0;
    var sys = /\{\{ '<\|im_start\|>system\n([^']*)<\|im_end\|>\n' \}\}/.exec(template);
    if (sys && template.indexOf("messages[0]['role'] != 'system'") >= 0) system = sys[1];
    function renderChat(messages, addGen) {
      if (!chatml) throw new Error("this file's chat template is not ChatML, which is the only " +
        "one the page can render");
      var s = "";
      messages.forEach(function (m, i) {
        if (i === 0 && m.role !== "system" && system !== null) s += "<|im_start|>system\n" +
          system + "<|im_end|>\n";
        s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      });
      return s + (addGen === false ? "" : "<|im_start|>assistant\n");
    }
    return { encode: encode, decode: decode, piece: piece, renderChat: renderChat,
      chat: function (messages, addGen) { return encode(renderChat(messages, addGen)); },
      hasChat: chatml, size: tokens.length, eos: meta["tokenizer.ggml.eos_token_id"],
        bos: meta["tokenizer.ggml.bos_token_id"],
      isSpecial: function (id) { return !!isSpecial[id]; },
        token: function (id) { return tokens[id]; } };
  }

  return { tokenizer: tokenizer, BYTE_CHAR: BYTE_CHAR };
})();

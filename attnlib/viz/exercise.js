/* attnlib self-grading exercise: the reader's answer checked in the page against the value the
   notebook computed. No eval: numbers are read by a small parser (+ - * / ^, parentheses, sqrt,
   exp, log, pi, e); shapes are the integers found in what was typed. Drawn with the shared DOM
   kit (window.attnlibKit, kit.js, carried before this file). */
(function () {
  "use strict";
  var K = window.attnlibKit, div = K.div;
  function inline(parent, text) { /* plain text with `code` spans */
    String(text).split("`").forEach(function (part, i) { if (part) div("", parent, part,
      i % 2 ? "code" : "span"); });
  }

  /* expression := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*;
     factor := ('+'|'-') factor |
     power; power := atom ('^' | '**') factor?; atom := number | name '(' expression ')' | name |
     '(' expression ')' */
  function parseNumber(src) {
    var s = String(src).replace(/\u2212/g, "-").replace(/\u00d7/g, "*").replace(/\u221a/g,
      "sqrt").replace(/,/g, ".").trim(), i = 0;
    var FN = { sqrt: Math.sqrt, exp: Math.exp, log: Math.log, ln: Math.log },
      CONST = { pi: Math.PI, e: Math.E };
    function ws() { while (s[i] === " ") i++; }
    function expr() { var v = term(); ws(); while (s[i] === "+" || s[i] === "-") { var op = s[i++];
      var r = term(); v = op === "+" ? v + r : v - r; ws(); } return v; }
    function term() {
      var v = factor(); ws();
      while ((s[i] === "*" && s[i + 1] !== "*") || s[i] === "/") { var op = s[i++];
        var r = factor(); v = op === "*" ? v * r : v / r; ws(); }
      return v;
    }
    function factor() { ws(); if (s[i] === "-") { i++; return -factor(); } if (s[i] === "+") { i++;
      return factor(); } return power(); }
    function power() {
      var v = atom(); ws();
      if (s[i] === "^" || (s[i] === "*" && s[i + 1] === "*")) { i += s[i] === "^" ? 1 : 2;
        return Math.pow(v, factor()); }
      return v;
    }
    function atom() {
      ws();
      var m = /^(\d+\.?\d*|\.\d+)(e[-+]?\d+)?/i.exec(s.slice(i));
      if (m) { i += m[0].length; return parseFloat(m[0]); }
      var w = /^[a-z]+/i.exec(s.slice(i));
      if (w) {
        var name = w[0].toLowerCase();
        i += w[0].length; ws();
        if (FN[name] && s[i] === "(") { i++; var a = expr(); ws();
          if (s[i++] !== ")") throw new Error(")"); return FN[name](a); }
        if (FN[name]) return FN[name](factor());
        if (name in CONST) return CONST[name];
        throw new Error("name");
      }
      if (s[i] === "(") { i++; var v = expr(); ws();
        if (s[i++] !== ")") throw new Error(")"); return v; }
      throw new Error("atom");
    }
    if (!s) return NaN;
    try { var v = expr(); ws(); return i === s.length ? v : NaN; } catch (err) { return NaN; }
  }
  function parseShape(src) { /* "(2, 4, 5)", "2x4x5", "[2,4,5]", "torch.Size([2, 4, 5])": whole
     numbers only, so "(2, 3.5)" is not read as (2, 3, 5) */
    var s = String(src).trim().replace(/^torch\.Size\((.*)\)$/i, "$1").trim();
    s = s.replace(/^[([]\s*/, "").replace(/\s*[)\]]$/, "");
    if (!/^\d+(\s*(,|x|\u00d7|\s)\s*\d+)*\s*,?$/i.test(s)) return [];
    return s.match(/\d+/g).map(Number);
  }

  function init(root, P) {
    var attempts = 0, result = "none", revealed = false, id = root.id || "attnlib-exercise";
    div("attnlib-exercise-title", root, P.title);
    var q = div("attnlib-exercise-q", root, undefined, "p");
    q.id = id + "-q";
    inline(q, P.question);
    var form = div("attnlib-exercise-form", root), input = null, radios = [];
    if (P.kind === "choice") {
      var fs = div("attnlib-exercise-choices", form, undefined, "fieldset");
      fs.setAttribute("aria-labelledby", q.id);
      P.choices.forEach(function (c, k) {
        var lab = div("attnlib-exercise-choice", fs, undefined, "label"),
          r = div("", lab, undefined, "input");
        r.type = "radio"; r.name = id + "-choice"; r.value = String(k);
        inline(div("", lab, undefined, "span"), c);
        r.addEventListener("change", function () { check.disabled = false; });
        radios.push(r);
      });
    } else {
      var lab = div("attnlib-exercise-label", form, undefined, "label");
      div("", lab, P.kind === "shape" ? "shape" : "your answer", "span");
      input = div("attnlib-exercise-input", lab, undefined, "input");
      input.type = "text"; input.autocomplete = "off"; input.spellcheck = false;
      input.setAttribute("aria-describedby", q.id);
      input.placeholder = P.kind === "shape" ? "e.g. (2, 3)" : "e.g. 0.5 or 1/3";
      if (P.unit) div("attnlib-exercise-unit", lab, P.unit, "span");
      input.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault();
        grade(); } e.stopPropagation(); });
      input.addEventListener("input", function () { check.disabled = !input.value.trim(); });
    }
    var check = div("attnlib-exercise-check", form, "Check", "button");
    check.type = "button"; check.disabled = true;
    var showBtn = div("attnlib-exercise-show", form, "Show the answer", "button");
    showBtn.type = "button"; showBtn.hidden = true;
    var fb = div("attnlib-exercise-feedback", root);
    fb.setAttribute("role", "status"); fb.setAttribute("aria-live", "polite");
    var expl = div("attnlib-exercise-explanation", root);
    expl.hidden = true;

    function answerText() {
      if (P.kind === "number") return String(Number(P.answer.toPrecision(4)));
      if (P.kind === "shape") return "(" + P.answer.join(", ") +
        (P.answer.length === 1 ? ",)" : ")");
      return P.choices[P.answer];
    }
    function reveal() {
      revealed = true;
      expl.textContent = "";
      var p = div("", expl, undefined, "p");
      div("attnlib-exercise-answer", p, "Answer: " + answerText() + (P.unit ?
        " " + P.unit : "") + ". ", "b");
      inline(p, P.explanation);
      expl.hidden = false;
      showBtn.hidden = true;
      paint();
    }
    function grade() {
      var ok, said;
      if (P.kind === "number") {
        var v = parseNumber(input.value);
        if (!isFinite(v)) { fb.className = "attnlib-exercise-feedback attnlib-exercise-unread";
          fb.textContent = "That is not a number I can read (try 0.58, 1/3 or sqrt(2))."; return; }
        ok = Math.abs(v - P.answer) <= P.tolerance; said = String(Number(v.toPrecision(6)));
      } else if (P.kind === "shape") {
        var sh = parseShape(input.value);
        if (!sh.length) { fb.className = "attnlib-exercise-feedback attnlib-exercise-unread";
          fb.textContent = "Type the sizes as whole numbers, e.g. (2, 4, 5)."; return; }
        ok = sh.length === P.answer.length && sh.every(function (d, k) {
          return d === P.answer[k]; });
        said = "(" + sh.join(", ") + ")";
      } else {
        var picked = radios.filter(function (r) { return r.checked; })[0];
        if (!picked) return;
        ok = +picked.value === P.answer; said = P.choices[+picked.value];
      }
      attempts++;
      result = ok ? "right" : "wrong";
      fb.className = "attnlib-exercise-feedback attnlib-exercise-" + result;
      fb.textContent = ok ? "Right: " + said + "." : "Not quite: " + said + " is not it." +
        (P.hint ? " Hint: " + P.hint : "") + " Try again, or show the answer.";
      if (ok) reveal(); else { showBtn.hidden = revealed; paint(); }
    }
    function paint() { root.setAttribute("data-state", ["attempts=" + attempts, "result=" + result,
      "revealed=" + (revealed ? 1 : 0)].join(";")); }
    check.addEventListener("click", grade);
    showBtn.addEventListener("click", reveal);
    K.keepKeys(root);
    root.attnlibExercise = { parseNumber: parseNumber, parseShape: parseShape };
    paint();
  }

  K.boot(document.currentScript, "attnlib-exercise", init, "exercise");
})();

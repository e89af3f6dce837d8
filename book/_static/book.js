/* The book's own page script (issue 36). Search result snippets: Sphinx's search builds them
   from the HTML of each page, where math is still TeX source ("\(\sqrt{d_k}\)"). Write it as
   plain text instead, close to how it reads typeset. */
(function () {
  "use strict";
  var GREEK = "alpha beta gamma delta epsilon theta lambda mu pi sigma tau phi psi omega".split(" ");
  var SYMBOLS = {
    "\\top": "\u1d40", "\\cdot": "\u00b7", "\\times": "\u00d7", "\\le": "\u2264", "\\leq": "\u2264",
    "\\ge": "\u2265", "\\geq": "\u2265", "\\ne": "\u2260", "\\neq": "\u2260", "\\infty": "\u221e",
    "\\approx": "\u2248", "\\in": "\u2208", "\\sum": "\u03a3", "\\to": "\u2192",
    "\\rightarrow": "\u2192", "\\leftarrow": "\u2190", "\\odot": "\u2299", "\\ldots": "\u2026",
    "\\dots": "\u2026", "\\cdots": "\u22ef", "\\prime": "\u2032", "\\Sigma": "\u03a3",
  };
  GREEK.forEach(function (g) {
    SYMBOLS["\\" + g] = String.fromCharCode(
      "\u03b1\u03b2\u03b3\u03b4\u03b5\u03b8\u03bb\u03bc\u03c0\u03c3\u03c4\u03c6\u03c8\u03c9"
        .charCodeAt(GREEK.indexOf(g)));
  });

  /* TeX source -> readable text: \frac{a}{b} -> a/b, \sqrt{x} -> sqrt(x), \mathrm{x} -> x,
     symbols by name, braces and remaining commands dropped. */
  function texToText(tex) {
    var s = tex.replace(/\^\s*(?:\{\\top\}|\\top)/g, "\u1d40").replace(/\\left|\\right/g, "")
      .replace(/\\(?:begin|end)\s*\{[^{}]*\}/g, " ").replace(/\\\\(?:\[[^\]]*\])?/g, "; ")
      .replace(/&(?:amp;)?/g, " ");
    for (var k = 0; k < 4; k++) {
      s = s.replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
        .replace(/\\sqrt\s*\{([^{}]*)\}/g, "\u221a($1)")
        .replace(/\\(?:mathrm|mathbf|mathit|text|textrm|operatorname|boldsymbol|mathcal)\s*\{([^{}]*)\}/g, "$1");
    }
    s = s.replace(/\\[A-Za-z]+/g, function (cmd) { return SYMBOLS[cmd] !== undefined ? SYMBOLS[cmd] : ""; })
      .replace(/\\[,;:! ]/g, " ")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ");
    return s.trim();
  }

  window.attnlibTexToText = texToText;

  /* Sphinx's searchtools.js declares `const Search` (a global binding, not a window property). */
  function patch() {
    if (typeof Search === "undefined" || typeof Search.htmlToText !== "function" ||
        Search.__attnlib) {
      return false;
    }
    var original = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      var text = original.call(this, htmlString, anchor);
      return text
        .replace(/\\\[([\s\S]*?)\\\]/g, function (_, tex) { return " " + texToText(tex) + " "; })
        .replace(/\\\(([\s\S]*?)\\\)/g, function (_, tex) { return texToText(tex); })
        .replace(/\$\$([\s\S]*?)\$\$/g, function (_, tex) { return " " + texToText(tex) + " "; });
    };
    Search.__attnlib = true;
    return true;
  }
  if (!patch()) {
    document.addEventListener("DOMContentLoaded", patch);
  }
})();

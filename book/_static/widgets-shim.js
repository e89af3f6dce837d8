/* Glue between the ipywidgets html-manager (embed.js) and this book's local assets.
 *
 * Loaded just before html-manager/embed.js (myst-nb `nb_ipywidgets_js` in _config.yml).
 * 1. Font path: embed.js's webpack bundle loads its icon fonts from
 *    `window.__jupyter_widgets_assets_path__` when set; point it at our own copy, so no font
 *    request ever leaves the book's host.
 * 2. MathJax 3: embed.js typesets widget labels with the MathJax 2 call
 *    `MathJax.Hub.Queue(["Typeset", MathJax.Hub, el])`, which does not exist in MathJax 3 (and the
 *    page's `window.MathJax` is first a plain config object, then replaced by MathJax itself).
 *    We give every value of `window.MathJax` a small `Hub.Queue` that forwards to
 *    `MathJax.typesetPromise` once MathJax has started.
 */
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  if (here) {
    window.__jupyter_widgets_assets_path__ = new URL("html-manager/", here).href;
  }

  // Elements to typeset once MathJax 3 has started (widgets often render before it has).
  var pending = [];
  var waiting = false;

  function ready(mj) {
    return mj && mj.startup && mj.startup.promise && typeof mj.typesetPromise === "function";
  }

  function flush(triesLeft) {
    var mj = window.MathJax;
    if (!ready(mj)) {
      if (triesLeft > 0) { setTimeout(function () { flush(triesLeft - 1); }, 100); }
      else { waiting = false; }  // no MathJax on this page: labels stay as written
      return;
    }
    waiting = false;
    var els = pending.splice(0, pending.length);
    els.forEach(dollarsToTex);
    mj.startup.promise
      .then(function () { return mj.typesetPromise(els); })
      .catch(function (err) { console.warn("MathJax typeset failed", err); });
  }

  // ipywidgets writes math as $...$ / $$...$$; the book's MathJax only knows \(...\) and \[...\]
  // (so that a dollar sign in prose never turns into math). Rewrite the delimiters in this
  // widget element only, then let MathJax typeset it.
  function dollarsToTex(el) {
    var walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walker.nextNode())) {
      if (node.parentElement && node.parentElement.closest("pre, code")) { continue; }
      var text = node.nodeValue;
      if (text.indexOf("$") < 0) { continue; }
      node.nodeValue = text
        .replace(/\$\$([^$]+)\$\$/g, "\\[$1\\]")
        .replace(/(^|[^\\])\$([^$]+)\$/g, "$1\\($2\\)");
    }
  }

  function typeset(el) {
    if (el) { pending.push(el); }
    if (!waiting) { waiting = true; flush(300); }
  }

  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset") { typeset(job[2]); }
        else if (typeof job === "function") { job(); }
      }
    },
  };

  function withHub(value) {
    if (value && typeof value === "object" && !value.Hub) {
      Object.defineProperty(value, "Hub", { value: hub, enumerable: false, configurable: true });
    }
    return value;
  }

  var current = withHub(window.MathJax);
  try {
    Object.defineProperty(window, "MathJax", {
      configurable: true,
      enumerable: true,
      get: function () { return current; },
      set: function (value) { current = withHub(value); },
    });
  } catch (err) {
    console.warn("widgets-shim: could not wrap window.MathJax", err);
  }
})();

/* attnlib explorer: open on the state its payload names in "initial" (one index per dim).
   Shipped only with explorers that ask for it, after explorer.js, which has drawn them by now:
   each slider is moved there as a reader would move it, so the state, the read-outs and the
   cells all follow. Copies of one output on a page are each moved once. */
(function () {
  var roots = document.querySelectorAll(
    "div.attnlib-explorer[data-attnlib-ready]:not([data-attnlib-opened])");
  for (var r = 0; r < roots.length; r++) {
    var root = roots[r];
    if (!root.querySelector("script.attnlib-initial")) continue;
    root.setAttribute("data-attnlib-opened", "1");
    try {
      var P = JSON.parse(root.querySelector("script.attnlib-data").textContent);
      var ranges = root.querySelectorAll(".attnlib-controls input[type=range]"), k = 0;
      P.dims.forEach(function (d, j) {
        if (d.labels.length < 2) return;  /* explorer.js draws no slider for a single label */
        var range = ranges[k++];
        if (!range || !P.initial[j]) return;
        range.value = String(P.initial[j]);
        range.dispatchEvent(new Event("input", { bubbles: true }));
      });
    } catch (err) { if (window.console) console.error("attnlib explorer (initial state):", err); }
  }
})();

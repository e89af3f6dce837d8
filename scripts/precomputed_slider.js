/* The book's precomputed slider (scripts/book_checks.py, PrecomputedSliders): its range input picks
   which stored state is shown; its value is said beside it and in aria-valuetext. A state not shown
   at load waits inert in a <template> (nothing parsed into the page, no image decoded) and is
   cloned in the first time it is picked. Once a page. */
window.attnlibPSlider = window.attnlibPSlider || (function () {
  "use strict";
  function materialize(state) {
    var t = state.firstElementChild;
    if (t && t.tagName === "TEMPLATE" && state.children.length === 1)
      state.replaceChildren(document.importNode(t.content, true));
  }
  function pick(r) {
    var root = r.closest(".attnlib-pslider"), k = +r.value;
    var states = root.querySelector(".attnlib-pslider-states").children;
    materialize(states[k]);
    for (var j = 0; j < states.length; j++) states[j].hidden = j !== k;
    var label = states[k].getAttribute("data-label");
    root.querySelector(".attnlib-pslider-value").textContent = label;
    r.setAttribute("aria-valuetext", r.getAttribute("aria-label") + " " + label);
    root.setAttribute("data-state", label);
  }
  function on(e) {
    var r = e.target;
    if (r && r.classList && r.classList.contains("attnlib-pslider-range")) pick(r);
  }
  document.addEventListener("input", on);
  document.addEventListener("change", on);
  return {pick: pick, materialize: materialize};
})();

/* attnlib: mouse and keyboard on a drawn attention heatmap, shared by explorer.js and live.js
   (every output carries this file before its own script; defining it twice is harmless).
   o: svg, cursor and rowLabels of the heatmap just drawn; rows, cols: its size; cur() -> [row, col]
   of the keyboard cursor; moveCursor(i, j), selectRow(r) (-1 clears), showTip(cell index, row-major),
   hideTip(). */
window.attnlibWireHeatmap = function (o) {
  var svg = o.svg;
  svg.addEventListener("mouseover", function (e) {
    var t = e.target;
    if (t.classList && t.classList.contains("attnlib-cell")) o.showTip(+t.getAttribute("data-row") * o.cols + +t.getAttribute("data-col"));
  });
  svg.addEventListener("mouseleave", o.hideTip);
  svg.addEventListener("click", function (e) {
    var r = e.target.getAttribute && e.target.getAttribute("data-row");
    if (r !== null && r !== undefined) o.selectRow(+r);
  });
  svg.addEventListener("focus", function (e) { if (e.target === svg) o.moveCursor(o.cur()[0], o.cur()[1]); });
  svg.addEventListener("blur", function () { o.cursor.setAttribute("visibility", "hidden"); o.hideTip(); });
  svg.addEventListener("keydown", function (e) {
    var t = e.target, key = e.key, r;
    if (t !== svg) { /* a row label */
      r = +t.getAttribute("data-row");
      if (key === "Enter" || key === " ") o.selectRow(r);
      else if (key === "ArrowDown" && r + 1 < o.rows) o.rowLabels[r + 1].focus();
      else if (key === "ArrowUp" && r > 0) o.rowLabels[r - 1].focus();
      else if (key === "Escape") o.selectRow(-1);
      else return;
      e.preventDefault();
      return;
    }
    var i = o.cur()[0], j = o.cur()[1];
    if (key === "ArrowDown") o.moveCursor(i + 1, j);
    else if (key === "ArrowUp") o.moveCursor(i - 1, j);
    else if (key === "ArrowRight") o.moveCursor(i, j + 1);
    else if (key === "ArrowLeft") o.moveCursor(i, j - 1);
    else if (key === "Home") o.moveCursor(i, 0);
    else if (key === "End") o.moveCursor(i, o.cols - 1);
    else if (key === "Enter" || key === " ") o.selectRow(i);
    else if (key === "Escape") { o.selectRow(-1); o.hideTip(); }
    else return;
    e.preventDefault();
  });
};

/* Keys typed inside an attnlib output are its own: JupyterLab listens on document (bubbling) and
   would otherwise also act on them (arrows move between cells, Enter edits, "a"/"b"/"d d" edit
   cells). Escape outside the heatmap clears the selected row where escapes(target) says so. */
window.attnlibKeepKeys = function (root, escapes, clear) {
  root.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && e.target.tagName !== "svg" && escapes(e.target)) clear();
    if (!(e.ctrlKey || e.metaKey || e.altKey || (e.shiftKey && e.key === "Enter"))) e.stopPropagation();
  });
};

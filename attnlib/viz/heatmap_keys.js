/* attnlib: mouse and keyboard on the attention heatmap that explorer.js and
   live.js draw and repaint
   in place (the kit's heatmap, kit.js, wires its own); both outputs carry this file before their
   own script, and defining it twice is harmless.
   o: svg, cells (row-major), cursor and rowLabels of the heatmap just drawn; rows, cols: its size;
   cur() -> [row, col] of the keyboard cursor (moved in place); selectRow(r) (-1 clears),
   showTip(cell index, row-major), hideTip(). (An older caller's own moveCursor(i, j) is used.) */
window.attnlibWireHeatmap = function (o) {
  var svg = o.svg;
  /* the keyboard cursor to cell (i, j), clamped to the matrix, and the tooltip of that cell */
  var moveCursor = o.moveCursor || function (i, j) {
    var cur = o.cur(), c;
    cur[0] = Math.max(0, Math.min(o.rows - 1, i));
    cur[1] = Math.max(0, Math.min(o.cols - 1, j));
    c = o.cells[cur[0] * o.cols + cur[1]];
    o.cursor.setAttribute("x", c.getAttribute("x"));
    o.cursor.setAttribute("y", c.getAttribute("y"));
    o.cursor.setAttribute("visibility", "visible");
    o.showTip(cur[0] * o.cols + cur[1]);
  };
  svg.addEventListener("mouseover", function (e) {
    var t = e.target;
    if (t.classList && t.classList.contains("attnlib-cell")) o.showTip(+t.getAttribute("data-row") *
      o.cols + +t.getAttribute("data-col"));
  });
  svg.addEventListener("mouseleave", o.hideTip);
  svg.addEventListener("click", function (e) {
    var r = e.target.getAttribute && e.target.getAttribute("data-row");
    if (r !== null && r !== undefined) o.selectRow(+r);
  });
  svg.addEventListener("focus", function (e) {
    if (e.target === svg) moveCursor(o.cur()[0], o.cur()[1]); });
  svg.addEventListener("blur", function () { o.cursor.setAttribute("visibility",
    "hidden"); o.hideTip(); });
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
    if (key === "ArrowDown") moveCursor(i + 1, j);
    else if (key === "ArrowUp") moveCursor(i - 1, j);
    else if (key === "ArrowRight") moveCursor(i, j + 1);
    else if (key === "ArrowLeft") moveCursor(i, j - 1);
    else if (key === "Home") moveCursor(i, 0);
    else if (key === "End") moveCursor(i, o.cols - 1);
    else if (key === "Enter" || key === " ") o.selectRow(i);
    else if (key === "Escape") { o.selectRow(-1); o.hideTip(); }
    else return;
    e.preventDefault();
  });
};


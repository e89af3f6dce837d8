/* Start this vector explorer (and copies of it) with window.attnlibVectors (vectors.js). */
window.attnlibKit.boot(document.currentScript, "attnlib-vectors",
  window.attnlibVectors, "vector explorer");

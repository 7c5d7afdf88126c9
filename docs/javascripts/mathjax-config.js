// MathJax 3 reads this before it loads (mkdocs.yml lists it first). pymdownx.arithmatex wraps each formula in an
// element of class "arithmatex" holding \( ... \) or \[ ... \]; only those are typeset. Material for MkDocs swaps
// pages without a reload (document$), so each new page is typeset again.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  svg: { fontCache: "global" },
};

if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) {
      MathJax.typesetClear();
      MathJax.texReset();
      MathJax.typesetPromise();
    }
  });
}

// Site only. Keeps what a reader must read inside the text column, at any width: display formulas
// and the text printed by the chapters' code (stream and plain-text outputs).
//
// Formulas: MathJax 3 has no automatic line breaking, so a display formula wider than its box is
// scaled down to fit, never below SMALLEST_FORMULA of its size; one that would need more stays at
// that size and scrolls sideways (its box scrolls: mjx-container has overflow auto).
// Printed text, by kind:
//  - a table (a rule of dashes under its header, as tabulate and pandas print one) keeps its
//    columns aligned: its font shrinks to fit, never below SMALLEST_TEXT_PX; a table that is still
//    too wide scrolls; the lines printed around it in the same output wrap;
//  - a code listing shrinks the same way, and wraps where even that is too wide;
//  - anything else (lines of results, lists, sentences) wraps at its own size.
// A wrapped line continues indented under its own start (a hanging indent), so the reader sees
// where each printed line begins. Everything is measured again when its box changes width (a
// resized window, a folded solution opened) and when fonts finish loading (MathJax's and the
// monospace font arrive after the first fit and change how wide the same text is).
(function () {
  "use strict";
  var SMALLEST_FORMULA = 0.7;   // of a formula's size: smaller is hard to read
  var SMALLEST_TEXT_PX = 11;    // monospace below this is hard to read
  var HANG_CH = 4;              // a wrapped line's continuation: its indent plus this
  var TABLE_RULE = /^[ \t]*-{3,}(?:[ \t]+-{2,})+[ \t]*$/m;
  var TABLE_LINE = new RegExp(TABLE_RULE.source);  // the same rule, one line tested
  var CODE_START = /^\s*(?:@\w|(?:async\s+)?def\s|class\s)/;
  var widths = new WeakMap();   // the width each box was last fitted at
  var watched = [];             // [box, fit] of every box fitted

  function changed(box) {
    var w = box.clientWidth;
    if (!w || widths.get(box) === w) return false;
    widths.set(box, w);
    return true;
  }

  function fitFormula(container) {
    var math = container.querySelector("mjx-math");
    if (!math || !changed(container)) return;
    math.style.fontSize = "";
    var have = container.clientWidth, need = math.getBoundingClientRect().width;
    if (need <= have) return;
    // CHTML sizes everything in em: the width is proportional to the font size.
    var scale = Math.max(SMALLEST_FORMULA, Math.floor(1000 * (have - 1) / need) / 1000);
    math.style.fontSize = (100 * scale).toFixed(1) + "%";
  }

  function kindOf(text) {
    if (TABLE_RULE.test(text)) return "table";
    if (CODE_START.test(text)) return "code";
    return "text";
  }

  // Each printed line in a span of its own (its newline kept, so nothing changes until it wraps),
  // with the hanging indent of that line. Only plain text is split: Pygments starts every output
  // with an empty span, but text it styled (ANSI colours) keeps its spans and wraps unindented.
  function splitLines(pre) {
    if (pre.querySelector(".fit-line")) return;  // done at another width
    var styled = Array.prototype.some.call(pre.querySelectorAll("*"), function (e) { return e.textContent; });
    if (styled) return;
    var lines = pre.textContent.replace(/\n$/, "").split("\n");
    pre.textContent = "";
    lines.forEach(function (line) {
      var span = document.createElement("span");
      span.className = "fit-line";
      span.textContent = line + "\n";
      span.style.setProperty("--hang", (line.match(/^ */)[0].length + HANG_CH) + "ch");
      pre.appendChild(span);
    });
  }

  function overflows(pre) { return pre.scrollWidth > pre.clientWidth + 1; }

  // Monospace: the text's width is proportional to the font size (the padding is not).
  function shrink(pre) {
    if (!overflows(pre)) return;
    var style = getComputedStyle(pre), size = parseFloat(style.fontSize);
    var pad = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
    var fit = size * (pre.clientWidth - pad - 1) / (pre.scrollWidth - pad);
    pre.style.fontSize = Math.max(SMALLEST_TEXT_PX, Math.floor(10 * fit) / 10) + "px";
  }

  // The lines of each table (its header, its rule, its rows up to a blank line) do not wrap.
  function keepTableLines(pre) {
    var lines = pre.querySelectorAll(".fit-line");
    for (var i = 0; i < lines.length; i++) {
      if (!TABLE_LINE.test(lines[i].textContent.replace(/\n$/, ""))) continue;
      if (i > 0) lines[i - 1].classList.add("fit-keep");
      for (var j = i; j < lines.length && lines[j].textContent.trim(); j++) lines[j].classList.add("fit-keep");
    }
  }

  function fitText(pre) {
    if (!changed(pre)) return;
    pre.style.fontSize = "";
    pre.classList.remove("fit-wrap");
    if (!overflows(pre)) return;
    var kind = kindOf(pre.textContent);
    if (kind === "code") {
      shrink(pre);
      if (!overflows(pre)) return;
      pre.style.fontSize = "";
    }
    splitLines(pre);
    pre.classList.add("fit-wrap");
    if (kind === "table") {
      keepTableLines(pre);
      shrink(pre);
    }
  }

  var observer = "ResizeObserver" in window ? new ResizeObserver(function (entries) {
    entries.forEach(function (e) {
      if (e.target.tagName === "PRE") fitText(e.target);
      else fitFormula(e.target);
    });
  }) : null;

  function watch(box, fit) {
    watched.push([box, fit]);
    if (observer) observer.observe(box);  // also reports the first size
    else fit(box);
  }

  function refitAll() {
    widths = new WeakMap();
    watched.forEach(function (w) { w[1](w[0]); });
  }

  function start() {
    document.querySelectorAll(".cell_output .output pre").forEach(function (pre) { watch(pre, fitText); });
    var typeset = window.MathJax && MathJax.startup && MathJax.startup.promise;
    if (!typeset) return;
    typeset.then(function () {
      document.querySelectorAll('mjx-container[display="true"]').forEach(function (c) { watch(c, fitFormula); });
    });
    if (document.fonts) {
      document.fonts.addEventListener("loadingdone", refitAll);
      document.fonts.ready.then(refitAll);
    }
  }

  // MathJax (a deferred script) has set up its startup promise by the time the page has loaded.
  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();

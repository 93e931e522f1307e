// Site only. A figure is drawn for the 688 px text column; on a narrower screen (a phone) the page
// scales it down, and its text with it (12.5 px labels become about 6 px at 390 px). Each figure
// shown below SCALED of its drawn width gets an "Enlarge figure" button under it (and a tap on the
// figure does the same): a dialog shows it at its drawn size, scrolling sideways where the screen
// is narrower. The button is hidden while the figure is shown at its size (a desktop screen).
(function () {
  "use strict";
  var SCALED = 0.9;  // shown at under this share of its drawn width: offer it at full size
  // a plotted image; a drawing (role img, or group when it holds links), also inside a row of drawings;
  // the map of the game on the pages outside the chapters
  var FIGURES = ".cell_output > img, .cell_output .output.text_html svg[role='img'], .cell_output .output.text_html svg[role='group'], .game-map > svg";
  var dialog, scroller;

  function drawnWidth(figure) {
    if (figure.tagName === "IMG") return figure.naturalWidth;
    var box = figure.viewBox && figure.viewBox.baseVal;
    return box ? box.width : 0;
  }

  function makeDialog() {
    dialog = document.createElement("dialog");
    dialog.className = "figure-zoom";
    dialog.setAttribute("aria-label", "The figure at full size");
    var close = document.createElement("button");
    close.type = "button";
    close.className = "figure-zoom-close";
    close.textContent = "Close";
    close.addEventListener("click", function () { dialog.close(); });
    scroller = document.createElement("div");
    scroller.className = "figure-zoom-scroll";
    scroller.tabIndex = 0;  // a scrolling region the keyboard can scroll
    scroller.setAttribute("role", "region");
    scroller.setAttribute("aria-label", "figure; scroll to see all of it");
    dialog.append(close, scroller);
    // a tap outside the figure (on the backdrop) closes, as Escape does
    dialog.addEventListener("click", function (e) { if (e.target === dialog) dialog.close(); });
    // the copy leaves with the dialog: an SVG's ids (arrow markers) must stay unique on the page
    dialog.addEventListener("close", function () { scroller.replaceChildren(); });
    document.body.appendChild(dialog);
  }

  function open(figure) {
    if (!dialog) makeDialog();
    var copy = figure.cloneNode(true), width = drawnWidth(figure);
    copy.style.width = width + "px";
    copy.style.maxWidth = "none";
    copy.style.height = "auto";
    scroller.replaceChildren(copy);
    dialog.showModal();
    scroller.scrollLeft = 0;
  }

  function setUp(figure) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "figure-zoom-open";
    button.textContent = "Enlarge figure";
    button.hidden = true;
    button.addEventListener("click", function () { open(figure); });
    figure.insertAdjacentElement("afterend", button);
    figure.addEventListener("click", function (e) {
      if (!button.hidden && !(e.target.closest && e.target.closest("a"))) open(figure);
    });
    function update() {
      var width = drawnWidth(figure);
      button.hidden = !(width && figure.getBoundingClientRect().width < SCALED * width);
      figure.classList.toggle("figure-zoomable", !button.hidden);
    }
    if ("ResizeObserver" in window) new ResizeObserver(update).observe(figure);
    if (figure.tagName === "IMG" && !figure.complete) figure.addEventListener("load", update);
    update();
  }

  function start() { document.querySelectorAll(FIGURES).forEach(setUp); }

  if (document.readyState === "complete") start();
  else window.addEventListener("load", start);
})();

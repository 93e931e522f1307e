// Site only. The ipywidgets embed manager draws the saved output of an interactive widget (a
// plot made with the widget's default settings) as a bare <img>. Give each one alt text, so that
// every figure on the page says what it is; the chapter's static figure next to the widget
// carries the full description.
//
// It also draws a slider as a <div role="slider"> next to a <label> that is not tied to it, so a
// screen reader announces a slider with no name. Each unnamed slider takes the text of its
// widget's label ("shift", "mask rate"), and a label's empty tooltip ("null") is dropped.
(function () {
  "use strict";
  var TEXT = "Snapshot of the interactive widget's plot at its default settings " +
             "(a live kernel redraws it; the static figure nearby describes it in full).";
  function label(root) {
    var imgs = (root.querySelectorAll ? root : document).querySelectorAll(
      ".jupyter-widgets img:not([alt]), .widget-output img:not([alt])");
    for (var i = 0; i < imgs.length; i++) imgs[i].setAttribute("alt", TEXT);
    var sliders = (root.querySelectorAll ? root : document).querySelectorAll(
      ".jupyter-widgets [role=slider]:not([aria-label]):not([aria-labelledby])");
    for (var k = 0; k < sliders.length; k++) name(sliders[k]);
  }
  function name(slider) {
    if (slider.hasAttribute("aria-label") || slider.hasAttribute("aria-labelledby")) return;
    var widget = slider.closest(".widget-slider, .jupyter-widgets");
    var text = widget && widget.querySelector(".widget-label");
    if (text && text.getAttribute("title") === "null") text.removeAttribute("title");
    var words = text && text.textContent.trim();
    slider.setAttribute("aria-label", words || "Slider");
  }
  new MutationObserver(function (records) {
    for (var r = 0; r < records.length; r++) {
      for (var n = 0; n < records[r].addedNodes.length; n++) {
        var node = records[r].addedNodes[n];
        if (node.nodeType === 1) {
          if (node.tagName === "IMG" && !node.hasAttribute("alt") &&
              node.closest(".jupyter-widgets, .widget-output")) node.setAttribute("alt", TEXT);
          if (node.matches("[role=slider]") && node.closest(".jupyter-widgets")) name(node);
          label(node);
        }
      }
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", function () { label(document); });
})();

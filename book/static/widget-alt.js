// Site only. Names for what the ipywidgets embed manager draws from a chapter's saved widget
// state, so that every figure and control on the page says what it is:
//
// - the saved output of an interactive widget (a plot made with the widget's default settings)
//   is a bare <img>: it gets alt text (the chapter's static figure next to it carries the full
//   description);
// - a slider's handle (a <div role="slider">) and its editable readout sit next to a <label>
//   that is not tied to them, so a screen reader announces controls with no name: each takes
//   the text of its widget's label ("shift", "mask rate"), and a label's empty tooltip ("null")
//   is dropped.
//
// The manager draws widgets after the page has loaded, and may add a handle after its widget,
// so one observer names whatever it adds.
(function () {
  "use strict";
  var TEXT = "Snapshot of the interactive widget's plot at its default settings " +
             "(a live kernel redraws it; the static figure nearby describes it in full).";
  var WIDGET = ".widget-slider, .jupyter-widgets, .widget-output";
  var IMAGES = ".jupyter-widgets img:not([alt]), .widget-output img:not([alt])";
  var HANDLES = '[role="slider"]:not([aria-label]):not([aria-labelledby])';
  var READOUTS = ".widget-slider .widget-readout:not([aria-label])";

  // The visible label of the widget that holds a control, its empty tooltip dropped.
  function labelOf(control) {
    var widget = control.closest(".widget-slider, .jupyter-widgets");
    var label = widget && widget.querySelector(".widget-label");
    if (!label) return "";
    if (label.getAttribute("title") === "null") label.removeAttribute("title");
    return label.textContent.trim();
  }

  // Name everything unnamed in scope (an element, or the document).
  function name(scope) {
    scope.querySelectorAll(IMAGES).forEach(function (img) { img.setAttribute("alt", TEXT); });
    scope.querySelectorAll(HANDLES).forEach(function (handle) {
      if (handle.closest(".widget-slider, .jupyter-widgets")) {
        handle.setAttribute("aria-label", labelOf(handle) || "Slider");
      }
    });
    scope.querySelectorAll(READOUTS).forEach(function (readout) {
      var words = labelOf(readout);
      if (words) readout.setAttribute("aria-label", words + " (value)");
    });
  }

  new MutationObserver(function (records) {
    records.forEach(function (record) {
      record.addedNodes.forEach(function (node) {
        // the widget the node was added to, so that the node itself is named too
        if (node.nodeType === 1) name(node.closest(WIDGET) || node);
      });
    });
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", function () { name(document); });
})();

// Site only. An ipywidgets slider drawn from saved state shows its description as a visible
// label, but the handle a keyboard or screen reader uses (a div with role="slider") and the
// editable readout next to it are not tied to that label. Give both the label's text as their
// accessible name, so every control on the page says what it sets.
(function () {
  "use strict";
  function name(root) {
    var sliders = (root.querySelectorAll ? root : document).querySelectorAll(".widget-slider");
    for (var i = 0; i < sliders.length; i++) {
      var label = sliders[i].querySelector(".widget-label");
      var text = label ? label.textContent.trim() : "";
      if (!text) continue;
      var handles = sliders[i].querySelectorAll('[role="slider"]:not([aria-label])');
      for (var h = 0; h < handles.length; h++) handles[h].setAttribute("aria-label", text);
      var readout = sliders[i].querySelector(".widget-readout:not([aria-label])");
      if (readout) readout.setAttribute("aria-label", text + " (value)");
    }
  }
  new MutationObserver(function (records) {
    for (var r = 0; r < records.length; r++) {
      for (var n = 0; n < records[r].addedNodes.length; n++) {
        var node = records[r].addedNodes[n];
        if (node.nodeType === 1) name(node.closest && node.closest(".widget-slider") ?
                                      node.closest(".widget-slider").parentNode : node);
      }
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", function () { name(document); });
})();

// Recall widgets keep score on the site: the first choice opened in a true-or-false widget is the
// reader's committed answer; reveal and spot-the-error widgets count once opened. The widgets are
// plain <details> and work without this script (in JupyterLab, which strips scripts from stored
// outputs, they simply have no score).
(function () {
  "use strict";
  function setup() {
    var widgets = document.querySelectorAll(".recall");
    if (!widgets.length) return;
    var state = { committed: 0, right: 0, tf: 0, opened: 0, total: widgets.length };
    var box = document.createElement("div");
    box.className = "recall-score";
    box.setAttribute("role", "status");
    box.setAttribute("aria-live", "polite");
    function render() {
      box.textContent = "Self-test on this page: " + state.opened + " of " + state.total +
        " answered" + (state.tf ? " · true-or-false right: " + state.right + " of " +
        state.committed + " committed (" + state.tf + " on the page)" : "");
    }
    widgets.forEach(function (w) {
      if (w.dataset.recall === "tf") state.tf += 1;
      w.querySelectorAll("details").forEach(function (d) {
        d.addEventListener("toggle", function () {
          if (!d.open || w.dataset.answered) return;
          w.dataset.answered = "1";
          state.opened += 1;
          if (w.dataset.recall === "tf") {
            state.committed += 1;
            if (d.dataset.correct === "true") state.right += 1;
            w.dataset.committed = d.dataset.choice;
          }
          render();
        });
      });
    });
    render();
    var main = document.querySelector("main .bd-article") || document.querySelector("main") ||
      document.body;
    main.insertBefore(box, main.firstChild);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();

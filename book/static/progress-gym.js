// The gym's views: all its questions, only the ones the reader missed (a true-or-false or
// multiple-choice answer committed wrong), the ones not yet answered, or a shuffled quiz of N.
// The widgets are only shown, hidden or moved, never rebuilt, and "All" puts everything back.
// Each view can be opened from a link: gym.html?view=missed, ?view=quiz&n=5&seed=7 (a seed makes
// the quiz repeatable; without one every quiz is new).
(function () {
  "use strict";
  var GYM_PAGE = "book/gym.html";
  var VIEWS = {
    all: "All",
    missed: "Only the ones I missed",
    unanswered: "Not yet answered",
    quiz: "Shuffled quiz",
  };
  var NOTES = {
    all: "Every question of the gym.",
    missed: "True-or-false and multiple-choice questions whose committed answer was wrong. " +
      "Open the other choice to see why.",
    unanswered: "Questions you have not opened yet.",
    quiz: "A random selection, in random order.",
  };

  // A small seeded generator (mulberry32): the same seed gives the same quiz.
  function generator(seed) {
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6d2b79f5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // Fisher-Yates: the first n of a shuffled copy of items.
  function sample(items, n, random) {
    var copy = items.slice();
    for (var i = copy.length - 1; i > 0; i--) {
      var j = Math.floor(random() * (i + 1));
      var t = copy[i]; copy[i] = copy[j]; copy[j] = t;
    }
    return copy.slice(0, n);
  }

  // A widget with the text that belongs to it (the "Shown in ..." line after it): the widget's
  // block in its section and the siblings up to the next widget or heading.
  function unitOf(w) {
    var block = w;
    while (block.parentElement && !/^(SECTION|ARTICLE|MAIN)$/.test(block.parentElement.tagName)) {
      block = block.parentElement;
    }
    var nodes = [block];
    for (var n = block.nextElementSibling; n; n = n.nextElementSibling) {
      if (/^(H[1-6]|SECTION)$/.test(n.tagName) || n.matches(".recall") || n.querySelector(".recall")) break;
      nodes.push(n);
    }
    var anchor = document.createComment("recall " + window.recallProgress.itemId(w));
    block.parentNode.insertBefore(anchor, block);
    return { widget: w, nodes: nodes, anchor: anchor };
  }

  function setup() {
    var P = window.recallProgress;
    if (!P || P.pagePath() !== GYM_PAGE) return;
    var units = Array.prototype.map.call(document.querySelectorAll(".recall"), unitOf);
    if (!units.length) return;
    var params = new URLSearchParams(location.search);
    var seed = params.get("seed");
    var random = generator(seed !== null ? Number(seed) : Math.floor(Math.random() * 4294967296));
    var view = VIEWS[params.get("view")] ? params.get("view") : "all";

    var bar = document.createElement("div");
    bar.className = "progress-toolbar";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", "Which questions to show");
    var buttons = {};
    Object.keys(VIEWS).forEach(function (v) {
      var b = document.createElement("button");
      b.type = "button";
      b.dataset.view = v;
      b.addEventListener("click", function () { show(v); });
      buttons[v] = b;
    });
    var size = document.createElement("input");
    size.type = "number";
    size.min = "1";
    size.max = String(units.length);
    size.value = String(Math.min(Number(params.get("n")) || 10, units.length));
    size.className = "progress-quiz-size";
    var sizeLabel = document.createElement("label");
    sizeLabel.append("of ", size, " questions");
    var again = document.createElement("button");
    again.type = "button";
    again.className = "progress-reshuffle";
    again.textContent = "Shuffle again";
    again.addEventListener("click", function () { show("quiz"); });
    size.addEventListener("change", function () { if (view === "quiz") show("quiz"); });
    var note = document.createElement("p");
    note.className = "progress-view-note";
    note.setAttribute("role", "status");
    var quizControls = document.createElement("span");
    quizControls.className = "progress-quiz-controls";
    quizControls.append(buttons.quiz, " ", sizeLabel, " ", again);
    bar.append(buttons.all, buttons.missed, buttons.unanswered, quizControls, note);
    var quiz = document.createElement("ol");
    quiz.className = "progress-quiz";
    quiz.setAttribute("aria-label", "Quiz");

    var first = units[0].anchor;
    var article = document.querySelector("main article") || document.querySelector("main") ||
      document.body;
    var page = article.querySelector("section") || first.parentNode;
    var before = first;
    while (before.parentNode !== page && before.parentNode) before = before.parentNode;
    page.insertBefore(bar, before);
    page.insertBefore(quiz, before);

    function status(u) {
      var entry = P.read()[P.itemId(u.widget)];
      return !entry ? "unanswered" : entry.choice && !entry.right ? "missed" : "done";
    }

    function counts() {
      var c = { all: units.length, missed: 0, unanswered: 0 };
      units.forEach(function (u) { c[status(u)] = (c[status(u)] || 0) + 1; });
      Object.keys(VIEWS).forEach(function (v) {
        buttons[v].textContent = VIEWS[v] + (v in c && v !== "quiz" ? " (" + c[v] + ")" : "");
      });
    }

    function putBack() {
      units.forEach(function (u) {
        var at = u.anchor;
        u.nodes.forEach(function (n) {
          at.parentNode.insertBefore(n, at.nextSibling);
          at = n;
        });
      });
      quiz.textContent = "";
    }

    function show(v) {
      view = v;
      putBack();
      var chosen = units;
      if (v === "missed" || v === "unanswered") {
        chosen = units.filter(function (u) { return status(u) === v; });
      } else if (v === "quiz") {
        var n = Math.max(1, Math.min(units.length, Math.floor(Number(size.value)) || 10));
        size.value = String(n);
        chosen = sample(units, n, random);
        chosen.forEach(function (u) {
          var li = document.createElement("li");
          u.nodes.forEach(function (node) { li.appendChild(node); });
          quiz.appendChild(li);
        });
      }
      units.forEach(function (u) {
        var hide = chosen.indexOf(u) < 0;
        u.nodes.forEach(function (node) { node.hidden = hide; });
      });
      // a section whose questions are all hidden is hidden too (never the one holding the toolbar)
      var sections = page.querySelectorAll("section");
      sections.forEach(function (s) { s.hidden = false; });
      sections.forEach(function (s) {
        var ws = s.querySelectorAll(".recall");
        s.hidden = ws.length > 0 && !s.contains(bar) &&
          Array.prototype.every.call(ws, function (w) { return w.closest("[hidden]"); });
      });
      Object.keys(buttons).forEach(function (k) {
        buttons[k].setAttribute("aria-pressed", String(k === v));
      });
      again.hidden = v !== "quiz";
      quiz.hidden = v !== "quiz";
      note.textContent = NOTES[v] + " Showing " + chosen.length + " of " + units.length + "." +
        (chosen.length ? "" : " Nothing to show here yet.");
    }

    document.addEventListener("recall-progress", counts);
    counts();
    show(view);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();

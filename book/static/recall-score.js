// Recall widgets remember the reader's answers on the site. The first choice opened in a
// true-or-false or multiple-choice widget is the reader's committed answer; a reveal or
// spot-the-error widget counts as answered once opened. Each answer is kept in the browser's
// localStorage, under one key, by item id ({id: {choice, right, at}}), so it survives a reload and
// is seen by every page: answered widgets are marked when a page opens (their answers stay closed),
// each page keeps a score box, and the progress page adds them up.
//
// Progressive enhancement: the widgets are plain <details> and work without this script (in
// JupyterLab, which strips scripts from stored outputs, they simply have no memory and no score).
// Where localStorage is refused (some private modes throw), answers last until the page is left.
//
// Printing opens every <details> on the page and closes them again afterwards; answers opened
// for print are not committed.
(function () {
  "use strict";
  var KEY = "fill-in-the-blank.recall.v1";
  var PROGRESS_PAGE = "book/progress.html";
  var memory = {}; // the answers when localStorage is unavailable

  function read() {
    try {
      var saved = JSON.parse(window.localStorage.getItem(KEY) || "{}");
      return saved && typeof saved === "object" ? saved : {};
    } catch (e) {
      return memory;
    }
  }

  function write(answers) {
    memory = answers;
    try {
      window.localStorage.setItem(KEY, JSON.stringify(answers));
      return true;
    } catch (e) {
      return false;
    }
  }

  // Whether answers outlive the page (false in a browser that refuses localStorage).
  function persistent() {
    try {
      window.localStorage.setItem(KEY + ".probe", "1");
      window.localStorage.removeItem(KEY + ".probe");
      return true;
    } catch (e) {
      return false;
    }
  }

  // The site's root URL, and this page's path below it ("notebooks/03_the_log.html").
  function siteRoot() {
    return new URL(document.documentElement.dataset.content_root || "./", location.href).href;
  }
  function pagePath() {
    return decodeURI(location.pathname).slice(decodeURI(new URL(siteRoot()).pathname).length);
  }

  // A widget's id: its item id, or (without one) its page and place among the page's unnamed
  // widgets, "notebooks/10_pretraining.html#2" (book/_ext/progress_items.py names them alike).
  function itemId(w) {
    return w.dataset.item || w.dataset.recallKey;
  }
  // Whether the reader commits to one of its choices: the widget says so (data-choices), written
  // from its kind in mlm_lib/book/recall.py, so no script names a kind.
  function isChoice(w) {
    return w.dataset.choices === "true";
  }

  // The counts of a set of widgets, each {id, choices} (this page's, or a chapter's in
  // _static/progress-items.js): how many, answered, with choices, committed, right.
  function tally(entries, answers) {
    var s = { total: 0, answered: 0, choice: 0, committed: 0, right: 0 };
    entries.forEach(function (it) {
      var entry = answers[it.id];
      s.total += 1;
      if (it.choices) s.choice += 1;
      if (!entry) return;
      s.answered += 1;
      if (entry.choice) {
        s.committed += 1;
        if (entry.right) s.right += 1;
      }
    });
    return s;
  }

  function badge(parent, text) {
    if (parent.querySelector(":scope > .recall-badge")) return;
    var b = document.createElement("span");
    b.className = "recall-badge";
    b.textContent = text;
    parent.appendChild(b);
  }

  // Show that a widget was answered, without opening anything.
  function mark(w, entry) {
    w.dataset.answered = "1";
    w.classList.add("recall-answered");
    if (!entry.choice) {
      badge(w.querySelector(".recall-tag") || w, "Answered");
      return;
    }
    w.dataset.committed = entry.choice;
    w.dataset.right = String(!!entry.right);
    w.querySelectorAll(".recall-choice").forEach(function (d) {
      if (d.dataset.choice !== entry.choice) return;
      d.classList.add("recall-committed");
      badge(d.querySelector("summary"), "Your answer");
    });
  }

  var box = null;

  function refresh() {
    var widgets = Array.prototype.slice.call(document.querySelectorAll(".recall"));
    var answers = read();
    widgets.forEach(function (w) {
      if (answers[itemId(w)]) mark(w, answers[itemId(w)]);
    });
    var s = tally(widgets.map(function (w) { return { id: itemId(w), choices: isChoice(w) }; }),
      answers);
    if (box) {
      box.firstChild.textContent = "Self-test on this page: " + s.answered + " of " +
        s.total + " answered" + (s.choice ? " · choices right: " + s.right + " of " +
        s.committed + " committed (" + s.choice + " on the page)" : "") + " · ";
    }
    document.dispatchEvent(new CustomEvent("recall-progress"));
  }

  function commit(ev) {
    var d = ev.target;
    if (!(d instanceof HTMLDetailsElement) || !d.open || d.hasAttribute("data-print-opened")) return;
    var w = d.closest(".recall");
    if (!w || !itemId(w)) return;
    var answers = read();
    if (answers[itemId(w)]) return; // the first answer stays the committed one
    var entry = { choice: null, right: null, at: new Date().toISOString() };
    if (isChoice(w)) {
      if (!d.classList.contains("recall-choice")) return;
      entry.choice = d.dataset.choice;
      entry.right = d.dataset.correct === "true";
    }
    answers[itemId(w)] = entry;
    write(answers);
    refresh();
  }

  function setup() {
    var widgets = document.querySelectorAll(".recall");
    var unnamed = 0;
    widgets.forEach(function (w) {
      if (!w.dataset.item) w.dataset.recallKey = pagePath() + "#" + (++unnamed);
    });
    if (widgets.length) {
      box = document.createElement("div");
      box.className = "recall-score";
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      var link = document.createElement("a");
      link.href = siteRoot() + PROGRESS_PAGE;
      link.textContent = "all chapters";
      box.append(document.createTextNode(""), link);
      var main = document.querySelector("main .bd-article") || document.querySelector("main") ||
        document.body;
      main.insertBefore(box, main.firstChild);
    }
    // toggle does not bubble, but it can be caught on its way down
    document.addEventListener("toggle", commit, true);
    refresh();
  }

  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not([open])").forEach(function (d) {
      d.setAttribute("data-print-opened", "");
      d.open = true;
    });
  });
  window.addEventListener("afterprint", function () {
    document.querySelectorAll("details[data-print-opened]").forEach(function (d) {
      d.open = false;
      d.removeAttribute("data-print-opened");
    });
  });

  window.recallProgress = {
    read: read, write: write, persistent: persistent, siteRoot: siteRoot, pagePath: pagePath,
    itemId: itemId, isChoice: isChoice, tally: tally, refresh: refresh,
    clear: function () { write({}); },
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();

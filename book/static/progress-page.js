// The progress page: the reader's answers (kept in this browser by recall-score.js), counted
// chapter by chapter against the list of every recall widget on the site, which the build writes
// to _static/progress-items.js (book/_ext/progress_items.py). Also the "Clear my answers" button,
// which asks once more before it forgets anything.
(function () {
  "use strict";
  var GYM_PAGE = "book/gym.html";

  function textElement(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function link(href, text) {
    var a = textElement("a", text);
    a.href = href;
    return a;
  }

  // Per page, in the order of the book, the counts of recall-score.js: answered of total, and
  // right of committed for the questions with choices.
  function perPage(items, answers) {
    var pages = [], byUrl = {};
    items.forEach(function (it) {
      if (!byUrl[it.url]) pages.push(byUrl[it.url] = { url: it.url, chapter: it.chapter, items: [] });
      byUrl[it.url].items.push(it);
    });
    return pages.map(function (p) {
      var counts = window.recallProgress.tally(p.items, answers);
      counts.url = p.url;
      counts.chapter = p.chapter;
      return counts;
    });
  }

  function render(report, items) {
    var P = window.recallProgress;
    var root = P.siteRoot();
    var answers = P.read();
    var pages = perPage(items, answers);
    report.textContent = "";

    // the whole book, a question asked on two pages counted once
    var ids = {};
    items.forEach(function (it) { ids[it.id] = it; });
    var unique = Object.keys(ids).map(function (id) { return ids[id]; });
    var book = P.tally(unique, answers);
    var missed = book.committed - book.right;
    var summary = textElement("p", "", "progress-summary");
    summary.append("You have answered " + book.answered + " of the book’s " + book.total +
      " questions" + (unique.length < items.length ?
      " (a question asked on two pages counts once)." : "."));
    if (missed) {
      summary.append(" " + missed + " committed " + (missed === 1 ? "answer was" : "answers were") +
        " wrong: ");
      summary.append(link(root + GYM_PAGE + "?view=missed", "practise the ones you missed"), ".");
    }
    report.appendChild(summary);
    if (!P.persistent()) {
      report.appendChild(textElement("p", "This browser does not let the site keep your answers (a " +
        "private window, or storage turned off): they are forgotten when you leave a page.",
        "progress-warning"));
    }

    var table = textElement("table", undefined, "progress-table");
    table.appendChild(textElement("caption", "Recall questions answered, chapter by chapter"));
    var head = textElement("tr");
    ["Chapter", "Answered", "True-or-false and multiple choice"].forEach(function (h) {
      var th = textElement("th", h);
      th.scope = "col";
      head.appendChild(th);
    });
    table.appendChild(textElement("thead")).appendChild(head);
    var body = table.appendChild(textElement("tbody"));
    pages.forEach(function (p) {
      var tr = textElement("tr");
      tr.dataset.url = p.url;
      var th = textElement("th");
      th.scope = "row";
      th.appendChild(link(root + p.url, p.chapter));
      var done = textElement("td");
      done.dataset.answered = p.answered;
      done.dataset.total = p.total;
      done.append(p.answered + " of " + p.total);
      var bar = textElement("progress");
      bar.max = p.total;
      bar.value = p.answered;
      bar.setAttribute("aria-hidden", "true");
      done.append(" ", bar);
      var right = textElement("td", !p.choice ? "none on this page" : !p.committed ? "none committed yet" :
        p.right + " right of " + p.committed + " committed");
      right.dataset.right = p.right;
      right.dataset.committed = p.committed;
      tr.append(th, done, right);
      body.appendChild(tr);
    });
    report.appendChild(table);
    report.appendChild(clearControls(report, items, book.answered));
  }

  function clearControls(report, items, count) {
    var box = textElement("div", undefined, "progress-clear");
    var start = textElement("button", "Clear my answers");
    start.type = "button";
    start.disabled = !count;
    var confirmBox = textElement("div", undefined, "progress-confirm");
    confirmBox.hidden = true;
    var question = textElement("p", "Forget all " + count + " answers kept in this browser? This cannot " +
      "be undone.");
    var yes = textElement("button", "Yes, clear them");
    var no = textElement("button", "Cancel");
    yes.type = no.type = "button";
    confirmBox.append(question, yes, " ", no);
    var done = textElement("p", "", "progress-cleared");
    done.setAttribute("role", "status");
    start.addEventListener("click", function () {
      confirmBox.hidden = false;
      start.hidden = true;
      no.focus();
    });
    no.addEventListener("click", function () {
      confirmBox.hidden = true;
      start.hidden = false;
      start.focus();
    });
    yes.addEventListener("click", function () {
      window.recallProgress.clear();
      render(report, items);
      var note = report.querySelector(".progress-cleared");
      note.textContent = "Your answers are cleared.";
      note.tabIndex = -1;
      note.focus();
    });
    box.append(start, confirmBox, done);
    return box;
  }

  function setup() {
    var report = document.getElementById("progress-report");
    if (!report || !window.recallProgress) return;
    report.textContent = "Counting your answers…";
    var script = document.createElement("script");
    script.src = window.recallProgress.siteRoot() + "_static/progress-items.js";
    script.onload = function () { render(report, window.recallItems || []); };
    script.onerror = function () {
      report.textContent = "The list of the book's questions could not be loaded.";
    };
    document.head.appendChild(script);
    // answers given in another tab
    window.addEventListener("storage", function () {
      if (window.recallItems) render(report, window.recallItems);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();

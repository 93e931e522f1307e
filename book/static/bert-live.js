// Site only. The book's model in the reader's browser: every control that asks the model
// (mlm_lib/book/model_controls.py writes them into the chapters) answers on the published page,
// with no kernel and offline. Part 7 of 7: this file mounts each control on the page; the model, the
// controls' pieces and the controls themselves come from the files before it. Nothing loads until
// a control scrolls into view or is used; then a progress line shows the download. The fill-mask,
// attention and generate controls may instead ask the book's second model (second-model.onnx: a
// pretrained sentence encoder given back an MLM head, int8 weights), downloaded only when the
// reader chooses it, its size shown first.
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: all of them (it reads BertLive.KINDS when the page has loaded).
(function (B) {
  "use strict";
  var el = B.ui.el, model = B.model, ready = B.ready, downloaded = B.downloaded, listeners = B.listeners;
  var BOOK_MODEL = B.BOOK_MODEL;

  // ------------------------------------------------------------------ wiring a control
  function mount(root) {
    var spec = root.querySelector("script.bert-live-spec");
    var settings = spec ? JSON.parse(spec.textContent) : {};
    var build = B.KINDS[root.getAttribute("data-kind")];
    if (!build) return;
    var box = el("div", { class: "bert-live-controls" });
    var status = el("p", { class: "bert-live-status", role: "status", "aria-live": "polite",
                           text: "The book's model runs in your browser once this control is in view." });
    var result = el("div", { class: "bert-live-result", "aria-live": "polite" });
    var pending = 0, started = false, loading = false, hooks = [];
    var needs = function () { return [BOOK_MODEL]; }, loadingText = function () { return "Loading the model"; };
    var ui = {
      controls: function (nodes) { nodes.forEach(function (n) { box.appendChild(n); }); },
      update: function () { update(); },
      // the model files it runs, when not the book's: a list, or a function of the control's
      // settings (with what to say while they load)
      uses: function (names, text) {
        needs = typeof names === "function" ? names : function () { return names; };
        if (text) loadingText = text;
      },
      tokenizerOnly: function () { needs = function () { return []; }; },  // never runs a model
      onStart: function (f) { hooks.push(f); },   // once, when the control first comes into view or is used
    };
    var compute = build(settings, ui);
    function update() {
      started = true;
      var mine = ++pending;
      loading = needs().some(function (n) { return !ready[n]; });
      if (loading) status.textContent = loadingText() + "…";
      compute().then(function (answer) {
        if (mine !== pending) return;
        loading = false;
        result.textContent = "";
        answer.nodes.forEach(function (n) { result.appendChild(n); });
        status.textContent = answer.status || "Computed in your browser by the book's model" + (answer.note || "") + ".";
        root.setAttribute("data-answered", String(mine));
      }).catch(function (err) {
        if (mine !== pending) return;
        loading = false;
        result.textContent = "";
        status.textContent = err.message || String(err);
        root.setAttribute("data-answered", String(mine));
      });
    }
    box.addEventListener("input", update);  // typing, sliders and menus alike
    root.textContent = "";
    root.appendChild(box); root.appendChild(status); root.appendChild(result);
    // On the site the kernel's copy of this control is dead: hide it (a notebook still shows it).
    // (A rule of the stylesheet, so that the widget the embed manager draws later is hidden too.)
    var area = root.closest(".cell_output");
    if (area) {
      area.classList.add("bert-live-host");
      Array.prototype.forEach.call(area.children, function (c) { if (c.contains(root)) c.classList.add("bert-live-own"); });
    }
    root.hidden = false;
    function progress() {
      if (loading) status.textContent = loadingText() + ": " + Math.round(100 * downloaded(needs())) + "%";
    }
    var start = function () {
      if (started) return;
      hooks.forEach(function (f) { f(); });
      if (needs().length) listeners.push(progress);
      needs().forEach(function (n) { model(n).catch(function () {}); });
      update();
    };
    if ("IntersectionObserver" in window) {
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); start(); }
      });
      seen.observe(root);
    }
    box.addEventListener("focusin", start, { once: true });
  }

  function mountAll() {
    var roots = document.querySelectorAll(".bert-live[data-kind]");
    roots.forEach(mount);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
})(window.BertLive = window.BertLive || {});

// Site only. Draws the book's live formula charts (mlm_lib/book/live.py): each chart is a <div> followed
// by its Vega-Lite specification as inert JSON; this script hands every one on the page to
// vega-embed, which the site serves itself (_static/vega/, copied from npm by the Makefile), so
// the charts compute in the reader's browser and work offline. SVG output keeps every number on
// the chart readable as text.
(function () {
  "use strict";
  var SPECS = 'script[type="application/json"].live-chart-spec';
  var here = document.currentScript ? document.currentScript.src : "";
  var base = new URL("vega/", here || document.baseURI).href;
  var FILES = { "vega": "vega.min", "vega-lite": "vega-lite.min", "vega-embed": "vega-embed.min" };

  function loadScript(name) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = base + FILES[name] + ".js";
      s.onload = resolve;
      s.onerror = function () { reject(new Error("could not load " + s.src)); };
      document.head.appendChild(s);
    });
  }

  function vegaEmbed() {
    if (window.vegaEmbed) return Promise.resolve(window.vegaEmbed);
    // Pages with ipywidgets load require.js, and the Vega bundles then register as AMD modules
    // instead of globals: ask require.js for them by name.
    if (typeof window.define === "function" && window.define.amd && window.require) {
      return new Promise(function (resolve, reject) {
        var paths = {};
        Object.keys(FILES).forEach(function (k) { paths[k] = base + FILES[k]; });
        window.require.config({ paths: paths });
        window.require(["vega-embed"], resolve, reject);
      });
    }
    return loadScript("vega").then(function () { return loadScript("vega-lite"); })
      .then(function () { return loadScript("vega-embed"); })
      .then(function () { return window.vegaEmbed; });
  }

  // Controls in the page's font; a chart wider than the page (a phone) shrinks to fit it, so every
  // bar stays in view (the SVG keeps its viewBox), and scrolls only if it still cannot fit.
  function addStyle() {
    var style = document.createElement("style");
    style.textContent =
      ".live-chart { overflow-x: auto; max-width: 100%; margin: 0.5em 0; }" +
      ".live-chart svg.marks { max-width: 100%; height: auto; }" +
      ".live-chart .vega-bindings { font-family: inherit; font-size: 0.95em; margin-top: 0.4em; }" +
      ".live-chart .vega-bind { margin: 0.2em 0; }" +
      ".live-chart .vega-bind-name { display: inline-block; min-width: 11em; }";
    document.head.appendChild(style);
  }

  function drawAll() {
    var specs = document.querySelectorAll(SPECS);
    if (!specs.length) return;
    addStyle();
    vegaEmbed().then(function (embed) {
      specs.forEach(function (node) {
        var target = document.getElementById(node.getAttribute("data-for"));
        if (!target || target.hasAttribute("data-drawn")) return;
        target.setAttribute("data-drawn", "pending");
        embed(target, JSON.parse(node.textContent), { renderer: "svg", actions: false })
          .then(function () { target.setAttribute("data-drawn", "yes"); })
          .catch(function (err) { target.setAttribute("data-drawn", "failed"); console.error(err); });
      });
    }).catch(function (err) { console.error(err); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();

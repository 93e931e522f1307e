// Site only, on pages with ipywidgets: what the embed manager (embed-amd.js) needs, loaded after
// require.js and before the manager (nb_ipywidgets_js in _config.yml).
//
// The manager finds its icon fonts relative to the URL require.js gives its module; on a page in
// a sub-folder that URL is wrong, so the module is pointed at _static of the site's root. The
// manager also typesets widget labels with MathJax 2's Hub.Queue; the site runs MathJax 3, so a
// small shim maps one onto the other.
(function () {
  "use strict";
  var root = new URL(document.documentElement.dataset.content_root || "./", document.baseURI);
  window.require.config({
    paths: { "@jupyter-widgets/html-manager/dist": new URL("_static", root).href },
  });

  // Hub.Queue(["Typeset", Hub, element]): typeset that element (or the page) with MathJax 3.
  function queue(job) {
    var element = Array.isArray(job) ? job[2] : undefined;
    if (window.MathJax.typesetPromise) window.MathJax.typesetPromise(element ? [element] : undefined);
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (window.MathJax && !window.MathJax.Hub) window.MathJax.Hub = { Queue: queue };
  });
})();

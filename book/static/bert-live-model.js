// Site only. The book's model in the reader's browser, part 1 of 7: loading and inference.
// onnxruntime-web runs book-model.onnx on WebAssembly, one thread (no cross-origin isolation
// needed), and tokenizers.js reads tokenizer.json; both, and the files mlm_lib/book/browser_model.py
// exports from the book's checkpoint, are served by the site itself (_static/ort/,
// _static/tokenizers/, _static/model/). Nothing here downloads until a control asks for it.
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: nothing. Gives BertLive: tokenizer, model, run, classify, topK, rankOf (the page's
// public API, which the browser tests call), and about, ready, downloaded, listeners for the rest.
(function (B) {
  "use strict";
  var here = document.currentScript ? document.currentScript.src : document.baseURI;
  var STATIC = new URL("./", here).href;
  var MODEL = STATIC + "model/";
  var NEG = -3.4028234663852886e38;  // torch.finfo(float32).min: a key that may not be read

  // ------------------------------------------------------------------ loading, once per page
  var tokenizers = {};   // vocabulary name -> Promise of {encode, vocab}
  var BOOK_MODEL = "book-model", SECOND_MODEL = "second-model";

  // Every download of the page, so that a progress line can show all of them as one share.
  var downloads = {}, listeners = [];
  // ``names``: the model files a control waits for (with the runtime); their share downloaded.
  function downloaded(names) {
    var got = 0, total = 0;
    Object.keys(downloads).forEach(function (u) {
      var file = u.slice(u.lastIndexOf("/") + 1).replace(/\.onnx$/, "");
      if (u.indexOf(MODEL) === 0 && names.indexOf(file) < 0) return;
      got += downloads[u][0]; total += downloads[u][1];
    });
    return total ? got / total : 0;
  }

  function fetchBytes(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) throw new Error("could not fetch " + url + " (" + r.status + ")");
      var total = Number(r.headers.get("Content-Length")) || 0;
      if (!r.body || !total) return r.arrayBuffer();
      var reader = r.body.getReader(), chunks = [], got = 0;
      downloads[url] = [0, total];
      function pump() {
        return reader.read().then(function (step) {
          if (step.done) {
            var all = new Uint8Array(got), at = 0;
            chunks.forEach(function (c) { all.set(c, at); at += c.length; });
            return all.buffer;
          }
          chunks.push(step.value); got += step.value.length;
          downloads[url][0] = got;
          listeners.forEach(function (f) { f(); });
          return pump();
        });
      }
      return pump();
    });
  }

  function tokenizer(name) {
    name = name || "book";
    if (!tokenizers[name]) {
      var folder = MODEL + (name === "book" ? "" : name + "-");
      tokenizers[name] = Promise.all([
        import(STATIC + "tokenizers/tokenizers.min.mjs"),
        fetch(folder + "tokenizer.json").then(function (r) { return r.json(); }),
        fetch(folder + "tokenizer_config.json").then(function (r) { return r.json(); }),
      ]).then(function (parts) {
        var tok = new parts[0].Tokenizer(parts[1], parts[2]);
        var vocab = [];
        Object.keys(parts[1].model.vocab).forEach(function (t) { vocab[parts[1].model.vocab[t]] = t; });
        return {
          vocab: vocab,
          ids: parts[1].model.vocab,
          // What mlm_lib.book.browser_model wrote from the checkpoint: the model's positions
          // (model_max_length) and the special pieces ([PAD], [UNK], [CLS], [SEP], [MASK]).
          maxPositions: parts[2].model_max_length,
          special: parts[1].added_tokens.filter(function (a) { return a.special; })
                                         .map(function (a) { return a.content; }),
          encode: function (text, pair) {
            var e = tok.encode(text, { text_pair: pair === undefined ? null : pair, return_token_type_ids: true });
            var types = e.token_type_ids || e.ids.map(function () { return 0; });
            return { ids: e.ids, tokens: e.ids.map(function (i) { return vocab[i]; }), types: types };
          },
        };
      });
    }
    return tokenizers[name];
  }

  // The runtime, once per page; each model file, once, when a control first needs it. The
  // runtime's module, its WebAssembly binary and the model file download side by side.
  var runtime = null, sessions = {}, ready = {};
  function onnxRuntime() {
    if (!runtime) {
      if (typeof WebAssembly !== "object") {
        return Promise.reject(new Error("this browser has no WebAssembly, which the model needs"));
      }
      runtime = Promise.all([
        import(STATIC + "ort/ort.wasm.min.mjs"),
        fetchBytes(STATIC + "ort/ort-wasm-simd-threaded.wasm"),
      ]).then(function (parts) {
        var ort = parts[0];
        ort.env.wasm.numThreads = 1;
        ort.env.logLevel = "error";  // not its notes on the CPU it runs on
        ort.env.wasm.wasmPaths = STATIC + "ort/";
        ort.env.wasm.wasmBinary = parts[1];
        return ort;
      });
      runtime.catch(function () { runtime = null; });
    }
    return runtime;
  }

  // ``name``: "book-model" (the default), or a model a chapter saved (mlm_lib/book/chapter_models.py).
  function model(name) {
    name = name || BOOK_MODEL;
    if (!sessions[name]) {
      var bytes = fetchBytes(MODEL + name + ".onnx");
      sessions[name] = Promise.all([onnxRuntime(), bytes]).then(function (parts) {
        // disable_quant_qdq: the second model's int8 weights are turned into float32 once, when the
        // session starts, and every product runs in float32, as in mlm_lib; by default onnxruntime
        // would quantize the activations too and compute something else (the book's other models
        // have no int8 weights, so the setting changes nothing for them)
        return parts[0].InferenceSession.create(parts[1], {
          executionProviders: ["wasm"], extra: { session: { disable_quant_qdq: "1" } } })
          .then(function (s) { ready[name] = true; return { ort: parts[0], session: s }; });
      });
      sessions[name].catch(function () { delete sessions[name]; });
    }
    return sessions[name];
  }

  function feedsOf(ort, enc, causal) {
    var T = enc.ids.length, bias = new Float32Array(T * T);
    if (causal) for (var q = 0; q < T; q++) for (var k = q + 1; k < T; k++) bias[q * T + k] = NEG;
    var big = function (a) { return BigInt64Array.from(a, function (v) { return BigInt(v); }); };
    return {
      input_ids: new ort.Tensor("int64", big(enc.ids), [1, T]),
      token_type_ids: new ort.Tensor("int64", big(enc.types), [1, T]),
      attn_bias: new ort.Tensor("float32", bias, [1, 1, T, T]),
    };
  }

  // A chapter 12 classifier: P over its labels, and their names.
  function classify(enc, name) {
    return Promise.all([model(name), labelsOf(name)]).then(function (parts) {
      return parts[0].session.run(feedsOf(parts[0].ort, enc, false)).then(function (out) {
        var p = Array.from(out.label_log_probs.data).map(Math.exp);
        return parts[1].map(function (label, k) { return { label: label, p: p[k] }; });
      });
    });
  }

  // What mlm_lib.book.browser_model wrote beside a model file: a classifier's label names, or the
  // second model's name, licence, size in bytes, layers and heads.
  var abouts = {};
  function about(name) {
    if (!abouts[name]) {
      abouts[name] = fetch(MODEL + name + ".json").then(function (r) {
        if (!r.ok) throw new Error("could not fetch " + name + ".json (" + r.status + ")");
        return r.json();
      });
      abouts[name].catch(function () { delete abouts[name]; });
    }
    return abouts[name];
  }
  function labelsOf(name) { return about(name).then(function (j) { return j.labels; }); }

  // One forward pass of the book's model (or chapter 11's, ``name`` "nsp", or the second model,
  // "second-model"): log P over V at every position [T][V], attention [L][A][T][T], NSP logits
  // (null for the second model, whose NSP head was never trained).
  function run(enc, causal, name) {
    return model(name).then(function (m) {
      var T = enc.ids.length, feeds = feedsOf(m.ort, enc, causal);
      return m.session.run(feeds).then(function (out) {
        var lp = out.log_probs, att = out.attentions, V = lp.dims[2];
        var rows = [];
        for (var i = 0; i < T; i++) rows.push(lp.data.subarray(i * V, (i + 1) * V));
        var L = att.dims[1], A = att.dims[2], maps = [];
        for (var l = 0; l < L; l++) {
          maps.push([]);
          for (var h = 0; h < A; h++) {
            var start = ((l * A) + h) * T * T, map = [];
            for (var r = 0; r < T; r++) map.push(att.data.subarray(start + r * T, start + (r + 1) * T));
            maps[l].push(map);
          }
        }
        return { logProbs: rows, attentions: maps, V: V,
                 nsp: out.nsp_logits ? Array.from(out.nsp_logits.data) : null };
      });
    });
  }

  // The k most probable pieces at one position, special tokens excluded as fill_mask excludes them.
  function topK(row, vocab, k, banned) {
    var best = [];
    for (var v = 0; v < row.length; v++) {
      if (banned && banned[v]) continue;
      if (best.length < k || row[v] > best[best.length - 1][1]) {
        best.push([v, row[v]]);
        best.sort(function (a, b) { return b[1] - a[1]; });
        if (best.length > k) best.pop();
      }
    }
    return best.map(function (p) { return { id: p[0], token: vocab[p[0]], p: Math.exp(p[1]) }; });
  }

  function rankOf(row, id) {
    var r = 1;
    for (var v = 0; v < row.length; v++) if (row[v] > row[id]) r++;
    return r;
  }

  B.BOOK_MODEL = BOOK_MODEL; B.SECOND_MODEL = SECOND_MODEL;
  B.tokenizer = tokenizer; B.model = model; B.run = run; B.classify = classify;
  B.topK = topK; B.rankOf = rankOf; B.about = about;
  B.ready = ready;             // model file -> true once its session has started
  B.downloaded = downloaded;   // the share of a control's files downloaded
  B.listeners = listeners;     // called on every chunk downloaded
})(window.BertLive = window.BertLive || {});

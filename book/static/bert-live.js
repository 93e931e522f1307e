// Site only. The book's model in the reader's browser: every control that asks the model
// (mlm_lib/book/model_controls.py writes them into the chapters) answers on the published page,
// with no kernel and offline. onnxruntime-web runs book-model.onnx on WebAssembly, one thread (no
// cross-origin isolation needed), and tokenizers.js reads tokenizer.json; both, and the files
// mlm_lib/book/browser_model.py exports from the book's checkpoint, are served by the site itself
// (_static/ort/, _static/tokenizers/, _static/model/). Nothing loads until a control scrolls into
// view or is used; then a progress line shows the download. The fill-mask, attention and generate
// controls may instead ask the book's second model (second-model.onnx: a pretrained sentence encoder given
// back an MLM head, int8 weights), downloaded only when the reader chooses it, its size shown first.
(function () {
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

  // ------------------------------------------------------------------ the page's pieces
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { node.appendChild(c); });
    return node;
  }

  var uid = 0;
  function field(label, input) {
    var id = "bert-live-" + (++uid);
    input.id = id;
    return el("div", { class: "bert-live-field" }, [el("label", { for: id, text: label }), input]);
  }

  function textBox(value, label) {
    return field(label, el("input", { type: "text", value: value, spellcheck: "false" }));
  }

  function choice(label, options, value) {
    var select = el("select", {});
    options.forEach(function (o) {
      var opt = el("option", { value: String(o[0]), text: o[1] });
      if (String(o[0]) === String(value)) opt.selected = true;
      select.appendChild(opt);
    });
    return field(label, select);
  }

  function slider(label, min, max, step, value) {
    var input = el("input", { type: "range", min: min, max: max, step: step, value: value });
    var f = field(label, input), shown = el("output", { text: String(value) });
    input.addEventListener("input", function () { shown.textContent = input.value; });
    f.appendChild(shown);
    return f;
  }

  function table(headers, rows) {
    var head = el("tr", {}, headers.map(function (h) { return el("th", { scope: "col", text: h }); }));
    var body = rows.map(function (r) {
      return el("tr", {}, r.map(function (c) { return el("td", { text: String(c) }); }));
    });
    return el("table", { class: "bert-live-table" }, [el("thead", {}, [head]), el("tbody", {}, body)]);
  }

  function fmt(p) { return p >= 0.001 ? p.toFixed(3) : p.toExponential(2); }

  function bannedIds(tok) {
    var banned = {};
    tok.special.forEach(function (t) { banned[tok.ids[t]] = true; });
    return banned;
  }

  // Checks every control shares: an answer the reader can act on, never an exception.
  function checkLength(tok, enc) {
    if (enc.ids.length > tok.maxPositions) {
      throw new Error(enc.ids.length + " tokens: the model reads at most " + tok.maxPositions +
                      " ([CLS] and [SEP] included); shorten the text");
    }
  }

  // The text of a control's box, tokenized and checked; ``what`` says what to type when it is empty.
  function readSentence(tok, box, what, longOk) {
    var t = box.querySelector("input").value;
    if (!t.trim()) throw new Error("the box is empty: type " + what);
    var enc = tok.encode(t);
    if (!longOk) checkLength(tok, enc);
    enc.text = t;
    return enc;
  }

  function blanksOf(enc) {
    var at = [];
    enc.tokens.forEach(function (t, i) { if (t === "[MASK]") at.push(i); });
    if (!at.length) throw new Error("no [MASK] in the text: write [MASK] where the blank is");
    return at;
  }

  function unknownNote(enc) {
    var n = enc.tokens.filter(function (t) { return t === "[UNK]"; }).length;
    return n ? " (" + n + " piece" + (n > 1 ? "s are" : " is") + " [UNK]: characters outside the vocabulary)" : "";
  }

  // ------------------------------------------------------------------ which model answers
  // The fill-mask, attention and generate controls ask the book's model, or the second model if the
  // reader chooses it. Its size, name and licence come from second-model.json, fetched when the control
  // starts; its weights only when it is chosen.
  var SECOND_NOTE = "a sentence encoder given back an MLM head, not BERT as Google trained it";
  function mb(bytes) { return (bytes / 1e6).toFixed(1) + " MB"; }

  function modelChoice(ui) {
    var f = choice("Model", [["book", "the book's model (2 layers, trained in this book)"],
                             ["second", "a pretrained encoder (a larger download)"]], "book");
    var select = f.querySelector("select");
    var second = null;
    ui.onStart(function () {
      about(SECOND_MODEL).then(function (a) {
        second = a;
        select.options[1].textContent = "a pretrained encoder, " + a.layers + " layers (" + mb(a.bytes) +
                                        " to download when chosen)";
      }).catch(function () {});
    });
    var pick = {
      field: f,
      second: function () { return select.value === "second"; },
      file: function () { return pick.second() ? SECOND_MODEL : BOOK_MODEL; },
      tokenizer: function () { return tokenizer(pick.second() ? "bert-base-uncased" : "book"); },
      about: function () { return pick.second() ? about(SECOND_MODEL) : Promise.resolve(null); },
      // what the status line says once the model has answered
      status: function (a, note) {
        if (!a) return "Computed in your browser by the book's model" + note + ".";
        select.options[1].textContent = "a pretrained encoder, " + a.layers + " layers (" + mb(a.bytes) + ", loaded)";
        return "Computed in your browser by " + a.name + " (" + SECOND_NOTE + "; weights in int8; " +
               "licence " + a.licence + ")" + note + ".";
      },
      loading: function () {
        return pick.second() && second ? "Loading the pretrained encoder (" + mb(second.bytes) + ")" : "Loading the model";
      },
    };
    ui.uses(function () { return [pick.file()]; }, pick.loading);
    return pick;
  }

  // ------------------------------------------------------------------ the controls, by kind
  var KINDS = {};

  // Chapter 10: fill-mask, and the rank of a word of your choice at the first blank.
  KINDS["fill-mask"] = function (s, ui) {
    var text = textBox(s.text, "Sentence with [MASK]"), word = textBox(s.answer || "", "A word to rank");
    var which = modelChoice(ui);
    ui.controls([text, word, which.field]);
    return function () {
      return Promise.all([which.tokenizer(), which.about()]).then(function (parts) {
        var tok = parts[0], about_ = parts[1], enc = readSentence(tok, text, "a sentence with [MASK]");
        var blanks = blanksOf(enc);
        return run(enc, false, which.file()).then(function (out) {
          var rows = [];
          blanks.forEach(function (i) {
            topK(out.logProbs[i], tok.vocab, 5).forEach(function (c, k) {
              rows.push([k ? "" : "position " + i, c.token, fmt(c.p)]);
            });
          });
          var parts = [table(["blank", "piece", "P"], rows)];
          var w = word.querySelector("input").value.trim().toLowerCase();
          if (w) {
            var id = tok.ids[w];
            parts.push(el("p", { text: id === undefined
              ? "'" + w + "' is not one piece of the vocabulary: try a shorter or commoner word"
              : "P(" + w + ") = " + fmt(Math.exp(out.logProbs[blanks[0]][id])) + " at position " +
                blanks[0] + ", rank " + rankOf(out.logProbs[blanks[0]], id).toLocaleString("en") +
                " of " + out.V.toLocaleString("en") }));
          }
          return { nodes: parts, status: which.status(about_, unknownNote(enc)) };
        });
      });
    };
  };

  // Chapter 7: the attention of any layer and head on your sentence.
  KINDS["attention"] = function (s, ui) {
    var text = textBox(s.text, "Sentence");
    var layer = choice("Layer", [[0, "0"], [1, "1"]], s.layer || 0);
    var head = choice("Head", [[0, "0"], [1, "1"]], s.head || 0);
    var which = modelChoice(ui);
    ui.controls([text, which.field, layer, head]);
    // The menus offer the chosen model's layers and heads (the book's: 2 and 2).
    function offer(f, n) {
      var select = f.querySelector("select"), keep = Math.min(+select.value, n - 1);
      if (select.options.length === n) return;
      select.textContent = "";
      for (var k = 0; k < n; k++) select.appendChild(el("option", { value: String(k), text: String(k) }));
      select.value = String(keep);
    }
    return function () {
      return Promise.all([which.tokenizer(), which.about()]).then(function (parts) {
        var tok = parts[0], a = parts[1], enc = readSentence(tok, text, "a sentence");
        offer(layer, a ? a.layers : 2);
        offer(head, a ? a.heads : 2);
        return run(enc, false, which.file()).then(function (out) {
          var map = out.attentions[+layer.querySelector("select").value][+head.querySelector("select").value];
          return { nodes: [heatmap(enc.tokens, map)], status: which.status(a, unknownNote(enc)) };
        });
      });
    };
  };

  function heatmap(tokens, map) {
    var grid = el("table", { class: "bert-live-heatmap" });
    grid.appendChild(el("caption", { text: "Row: the query (who reads); column: the key (who is read). " +
                                             "Darker: more weight; each row sums to 1." }));
    var head = el("tr", {}, [el("th", { scope: "col", text: "query \\ key" })]);
    tokens.forEach(function (t) { head.appendChild(el("th", { scope: "col", text: t })); });
    grid.appendChild(head);
    tokens.forEach(function (t, q) {
      var row = el("tr", {}, [el("th", { scope: "row", text: t })]);
      for (var k = 0; k < tokens.length; k++) {
        var w = map[q][k];
        var cell = el("td", { text: w.toFixed(2), title: t + " reads " + tokens[k] + ": " + w.toFixed(3) });
        cell.style.background = shade(w);
        row.appendChild(cell);
      }
      grid.appendChild(row);
    });
    return grid;
  }

  // An opaque colour from white (weight 0) to the book's blue, lightened so that black text stays
  // readable on it in the light and the dark theme alike.
  function shade(w) {
    var to = [76, 146, 195];
    return "rgb(" + to.map(function (c) { return Math.round(255 + (c - 255) * w); }).join(",") + ")";
  }

  // Chapter 9: WordPiece on your words, with the book's vocabulary or BERT's.
  KINDS["wordpiece"] = function (s, ui) {
    var text = textBox(s.text, "Text");
    var vocab = choice("Vocabulary", [["book", "the book's 8,000 pieces"],
                                      ["bert-base-uncased", "BERT-base's 30,522 pieces"]], "book");
    ui.controls([text, vocab]);
    ui.tokenizerOnly();
    return function () {
      return tokenizer(vocab.querySelector("select").value).then(function (tok) {
        var enc = readSentence(tok, text, "a word or a sentence", true), pieces = enc.tokens.slice(1, -1);
        return { nodes: [el("p", { class: "bert-live-pieces", text: pieces.length + " tokens: " + pieces.join(" | ") })],
                 status: "Split in your browser by tokenizers.js" + unknownNote(enc) + "." };
      });
    };
  };

  // Chapters 1, 2 and 5: click tokens into M; x\M, the guesses, P(x_i), each term and L.
  // The kernel's control in chapter 1 says the same (its buttons for these two are off too).
  var SPECIALS_NOT_IN_M = "[CLS] and [SEP] cannot be hidden: they mark where the input starts and " +
                          "ends, and BERT never puts them in M.";
  KINDS["blank"] = function (s, ui) {
    var text = textBox(s.text, "Sentence"), chosen = {};
    (s.chosen || []).forEach(function (i) { chosen[i] = true; });
    var buttons = el("div", { class: "bert-live-tokens", role: "group", "aria-label": "Tokens: press to put in M" });
    var temp = s.temperature ? slider("Temperature", 0.25, 4, 0.25, 1) : null;
    var why = el("p", { class: "bert-live-note", text: SPECIALS_NOT_IN_M });
    ui.controls(temp ? [text, buttons, why, temp] : [text, buttons, why]);
    var lastText = null, drawn = null;
    function drawButtons(tokens) {
      var key = tokens.join(" ");
      if (key === drawn) {  // the same tokens: only the pressed states change
        buttons.querySelectorAll("button").forEach(function (b, i) { b.setAttribute("aria-pressed", String(!!chosen[i])); });
        return;
      }
      drawn = key;
      buttons.textContent = "";
      tokens.forEach(function (t, i) {
        var special = t === "[CLS]" || t === "[SEP]";
        var b = el("button", { type: "button", "aria-pressed": String(!!chosen[i]), text: i + ": " + t });
        if (special) { b.disabled = true; b.title = SPECIALS_NOT_IN_M; }
        b.addEventListener("click", function () { chosen[i] = !chosen[i]; ui.update(); });
        buttons.appendChild(b);
      });
    }
    return function () {
      return tokenizer().then(function (tok) {
        var enc = readSentence(tok, text, "a sentence"), t = enc.text;
        if (lastText !== null && t !== lastText) chosen = {};
        lastText = t;
        drawButtons(enc.tokens);
        var M = enc.tokens.map(function (_, i) { return i; }).filter(function (i) {
          return chosen[i] && i > 0 && i < enc.tokens.length - 1;
        });
        if (!M.length) return { nodes: [el("p", { text: "M is empty: press tokens to hide them" })] };
        var ids = enc.ids.slice(), mask = tok.ids["[MASK]"];
        M.forEach(function (i) { ids[i] = mask; });
        var corrupted = { ids: ids, types: enc.types, tokens: ids.map(function (i) { return tok.vocab[i]; }) };
        return run(corrupted).then(function (out) {
          var T = temp ? +temp.querySelector("input").value : 1, L = 0, rows = [];
          M.forEach(function (i) {
            var row = out.logProbs[i];
            if (T !== 1) row = tempered(row, T);
            var lp = row[enc.ids[i]], guess = topK(row, tok.vocab, 1)[0];
            L -= lp;
            rows.push([i, enc.tokens[i], guess.token, fmt(Math.exp(lp)), (-lp).toFixed(3)]);
          });
          return { nodes: [
            el("p", { class: "bert-live-pieces", text: "x\\M = " + corrupted.tokens.join(" ") }),
            table(["i", "x_i", "model's guess", "P(x_i | x\\M)", "-log P"], rows),
            el("p", { text: "L = " + L.toFixed(3) + " nats over |M| = " + M.length + (T !== 1 ? " at temperature " + T : "") }),
          ], note: unknownNote(enc) };
        });
      });
    };
  };

  // log softmax(log p / T): the same scores divided by a temperature.
  function tempered(row, T) {
    var out = new Float32Array(row.length), max = -Infinity, sum = 0, v;
    for (v = 0; v < row.length; v++) { out[v] = row[v] / T; if (out[v] > max) max = out[v]; }
    for (v = 0; v < row.length; v++) sum += Math.exp(out[v] - max);
    var logZ = max + Math.log(sum);
    for (v = 0; v < row.length; v++) out[v] -= logZ;
    return out;
  }

  // Chapter 8: the same blank under BERT's mask and under a causal one.
  KINDS["masks"] = function (s, ui) {
    var text = textBox(s.text, "Sentence with [MASK]");
    ui.controls([text]);
    return function () {
      return tokenizer().then(function (tok) {
        var enc = readSentence(tok, text, "a sentence with [MASK]");
        var i = blanksOf(enc)[0];
        return Promise.all([run(enc, false), run(enc, true)]).then(function (outs) {
          var rows = [["both sides (BERT)"], ["left only (causal)"]].map(function (r, k) {
            return r.concat(topK(outs[k].logProbs[i], tok.vocab, 3).map(function (c) {
              return c.token + " " + fmt(c.p);
            }).join(", "));
          });
          var reach = enc.tokens.length - 1 - i;
          return { nodes: [table(["mask", "top three at position " + i], rows),
                           el("p", { text: "The causal mask hides the " + reach + " token" + (reach === 1 ? "" : "s") +
                                           " right of the blank from it." })], note: unknownNote(enc) };
        });
      });
    };
  };

  // Chapter 8: BERT used as GPT, as mlm_lib.causal.generate_left_to_right does: put [MASK] after
  // the text, take the most probable piece, append it, repeat.
  // ``name``: the model file (the book's model unless given).
  function leftToRight(tok, ids, n, banned, name) {
    var out = [];
    function step() {
      if (out.length === n) return Promise.resolve(out);
      var x = ids.concat(out, [tok.ids["[MASK]"], tok.ids["[SEP]"]]);
      return run({ ids: x, types: x.map(function () { return 0; }) }, false, name).then(function (r) {
        out.push(topK(r.logProbs[x.length - 2], tok.vocab, 1, banned)[0].id);
        return step();
      });
    }
    return step();
  }

  // ...and as mlm_lib.causal.generate_by_refilling does (mask-predict): fill all n blanks at once,
  // then in round t of T re-mask the floor(n (T - t) / T) pieces written with the lowest
  // probability (ties to the earlier position) and fill them again.
  function refill(tok, ids, n, rounds, banned, name) {
    var mask = tok.ids["[MASK]"], start = ids.length, draft = [], sure = [];
    for (var j = 0; j < n; j++) { draft.push(mask); sure.push(0); }
    banned = banned || bannedIds(tok);
    function round(t) {
      var k = Math.floor(n * (rounds - t) / rounds);
      if (t >= rounds || k === 0) return Promise.resolve(draft);
      if (t > 0) {
        draft.map(function (_, j) { return j; })
          .sort(function (a, b) { return sure[a] - sure[b] || a - b; })
          .slice(0, k).forEach(function (j) { draft[j] = mask; });
      }
      var x = ids.concat(draft, [tok.ids["[SEP]"]]);
      return run({ ids: x, types: x.map(function () { return 0; }) }, false, name).then(function (r) {
        draft.forEach(function (d, j) {
          if (d !== mask) return;
          var best = topK(r.logProbs[start + j], tok.vocab, 1, banned)[0];
          draft[j] = best.id;
          sure[j] = best.p;
        });
        return round(t + 1);
      });
    }
    return round(0);
  }

  KINDS["generate"] = function (s, ui) {
    var text = textBox(s.text, "Prompt"), length = slider("Pieces to add", 1, 20, 1, s.length || 12);
    var way = choice("How", [["left", "left to right, one [MASK] at a time"],
                             ["refill", "refill the whole draft (mask-predict)"]], s.way || "left");
    var rounds = slider("Refilling rounds", 1, 20, 1, s.rounds || 10);
    // Rounds belong to refilling: moving them chooses it, so the slider never does nothing.
    rounds.querySelector("input").addEventListener("input", function () {
      way.querySelector("select").value = "refill";
    });
    var which = modelChoice(ui);
    ui.controls([text, length, way, rounds, which.field]);
    return function () {
      return Promise.all([which.tokenizer(), which.about()]).then(function (parts) {
        var tok = parts[0], a = parts[1];
        var enc = readSentence(tok, text, "the start of a sentence", true), t = enc.text;
        var n = +length.querySelector("input").value, banned = bannedIds(tok);
        var ids = enc.ids.slice(0, -1);
        if (ids.length + n + 2 > tok.maxPositions) {
          throw new Error("the prompt and " + n + " pieces need more than the model's " + tok.maxPositions + " positions");
        }
        var refilling = way.querySelector("select").value === "refill";
        var made = refilling ? refill(tok, ids, n, +rounds.querySelector("input").value, banned, which.file())
                             : leftToRight(tok, ids, n, banned, which.file());
        return made.then(function (pieces) {
          var words = pieces.map(function (i) { return tok.vocab[i]; });
          return { nodes: [el("p", { class: "bert-live-pieces", text: t + " -> " + words.join(" ") })],
                   status: which.status(a, unknownNote(enc)) };
        });
      });
    };
  };

  // Chapter 6: your sentence corrupted at a seed you move.
  function mulberry32(seed) {
    return function () {
      seed |= 0; seed = seed + 0x6D2B79F5 | 0;
      var t = Math.imul(seed ^ seed >>> 15, 1 | seed);
      t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
      return ((t ^ t >>> 14) >>> 0) / 4294967296;
    };
  }

  KINDS["corrupt"] = function (s, ui) {
    var text = textBox(s.text, "Sentence"), rate = slider("Mask rate", 0.05, 1, 0.05, s.rate || 0.15);
    var seed = slider("Seed", 0, 99, 1, 0);
    ui.controls([text, rate, seed]);
    return function () {
      return tokenizer().then(function (tok) {
        var enc = readSentence(tok, text, "a sentence");
        var draw = mulberry32(+seed.querySelector("input").value), r = +rate.querySelector("input").value;
        var ids = enc.ids.slice(), kinds = {}, ordinary = tok.vocab.length - tok.special.length;
        enc.tokens.forEach(function (tk, i) {
          var inM = draw() < r, coin = draw(), pick = draw();
          if (tok.special.indexOf(tk) >= 0 || !inM) return;
          if (coin < 0.8) { ids[i] = tok.ids["[MASK]"]; kinds[i] = "[MASK]"; }
          else if (coin < 0.9) { ids[i] = tok.special.length + Math.floor(pick * ordinary); kinds[i] = "random"; }
          else kinds[i] = "kept";
        });
        var M = Object.keys(kinds).map(Number);
        var shown = ids.map(function (i) { return tok.vocab[i]; });
        if (!M.length) return { nodes: [el("p", { text: "x~ = " + shown.join(" ") + "   (M is empty at this seed)" })] };
        return run({ ids: ids, types: enc.types, tokens: shown }).then(function (out) {
          var rows = M.map(function (i) {
            var lp = out.logProbs[i][enc.ids[i]];
            return [i, enc.tokens[i], kinds[i], shown[i], topK(out.logProbs[i], tok.vocab, 1)[0].token, fmt(Math.exp(lp))];
          });
          return { nodes: [el("p", { class: "bert-live-pieces", text: "x~ = " + shown.join(" ") }),
                           table(["i", "x_i", "case", "reads", "model's guess", "P(x_i)"], rows)],
                   note: unknownNote(enc) };
        });
      });
    };
  };

  // Chapter 11: chapter 11's NSP head on one of its six pairs or on yours; the reader guesses first.
  KINDS["nsp"] = function (s, ui) {
    var OWN = "own", pairs = s.pairs || [];
    var pick = choice("Pair", pairs.map(function (p, k) { return [k, p.name]; }).concat([[OWN, "your own A and B"]]), 0);
    var guess = choice("Your guess: did B follow A?", [["?", "?"], ["IsNext", "IsNext"], ["NotNext", "NotNext"]], "?");
    var a = textBox(s.a || "", "Your sentence A"), b = textBox(s.b || "", "Your sentence B");
    ui.controls([pick, guess, a, b]);
    ui.uses(["nsp"]);
    [a, b].forEach(function (f) {  // typing a pair of one's own chooses it
      f.querySelector("input").addEventListener("input", function () { pick.querySelector("select").value = OWN; });
    });
    return function () {
      return tokenizer().then(function (tok) {
        var k = pick.querySelector("select").value, own = k === OWN;
        var pair = own ? { a: a.querySelector("input").value, b: b.querySelector("input").value, how: "your own pair" } : pairs[+k];
        var shown = [el("p", { text: "A: " + pair.a }), el("p", { text: "B: " + pair.b })];
        if (!pair.a.trim() || !pair.b.trim()) throw new Error("a box is empty: type a sentence A and a sentence B");
        var g = guess.querySelector("select").value;
        if (g === "?") {
          return { nodes: shown.concat([el("p", { text: "Did B follow A? Choose IsNext or NotNext to see the NSP head's answer." })]),
                   status: "Guess first: the answer is computed in your browser once you have." };
        }
        var enc = tok.encode(pair.a, pair.b);
        checkLength(tok, enc);
        return run(enc, false, "nsp").then(function (out) {
          var e = out.nsp.map(Math.exp), pNext = e[0] / (e[0] + e[1]);
          return { nodes: shown.concat([
            el("p", { text: "your guess: " + g + "   the NSP head: P(IsNext) = " + pNext.toFixed(2) +
                            ", so " + (pNext > 0.5 ? "IsNext" : "NotNext") }),
            el("p", { text: "how B was chosen: " + pair.how })]),
                   status: "Computed in your browser by chapter 11's NSP head" + unknownNote(enc) + "." };
        });
      });
    };
  };

  // Chapter 12: the classifiers fine-tuned in chapter 12 on your sentence.
  KINDS["classify"] = function (s, ui) {
    var text = textBox(s.text, "Sentence"), models = s.models || [];
    ui.controls([text]);
    ui.uses(models.map(function (m) { return m[1]; }));
    return function () {
      return tokenizer().then(function (tok) {
        var enc = readSentence(tok, text, "a sentence");
        return Promise.all(models.map(function (m) { return classify(enc, m[1]); })).then(function (answers) {
          var rows = answers.map(function (ps, k) {
            var sorted = ps.slice().sort(function (x, y) { return y.p - x.p; });
            return [models[k][0], sorted.map(function (c) { return c.label + " " + c.p.toFixed(2); }).join(", ")];
          });
          return { nodes: [table(["classifier", "P(label | sentence), most probable first"], rows)],
                   status: "Computed in your browser by chapter 12's classifiers" + unknownNote(enc) + "." };
        });
      });
    };
  };

  // ------------------------------------------------------------------ wiring a control
  function mount(root) {
    var spec = root.querySelector("script.bert-live-spec");
    var settings = spec ? JSON.parse(spec.textContent) : {};
    var build = KINDS[root.getAttribute("data-kind")];
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

  window.BertLive = { tokenizer: tokenizer, model: model, run: run, classify: classify, topK: topK, rankOf: rankOf,
                     leftToRight: leftToRight, refill: refill };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
})();

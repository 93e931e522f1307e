// Site only. The book's model in the reader's browser, part 2 of 7: the pieces every control is
// built from (fields, tables, the checks of the reader's text) and the menu of which model answers.
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: bert-live-model.js. Gives BertLive.ui.
(function (B) {
  "use strict";
  var tokenizer = B.tokenizer, about = B.about, BOOK_MODEL = B.BOOK_MODEL, SECOND_MODEL = B.SECOND_MODEL;

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

  B.ui = { el: el, field: field, textBox: textBox, choice: choice, slider: slider, table: table, fmt: fmt,
           bannedIds: bannedIds, checkLength: checkLength, readSentence: readSentence, blanksOf: blanksOf,
           unknownNote: unknownNote, modelChoice: modelChoice };
})(window.BertLive = window.BertLive || {});

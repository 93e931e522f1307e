// Site only. The book's model in the reader's browser, part 3 of 7: the controls that fill blanks
// (chapters 1, 2 and 5: your M; 6: your corruption; 9: WordPiece; 10: fill-mask).
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: bert-live-model.js, bert-live-ui.js. Gives BertLive.KINDS.
(function (B) {
  "use strict";
  var tokenizer = B.tokenizer, run = B.run, topK = B.topK, rankOf = B.rankOf;
  var el = B.ui.el, textBox = B.ui.textBox, choice = B.ui.choice, slider = B.ui.slider,
      table = B.ui.table, fmt = B.ui.fmt, readSentence = B.ui.readSentence, blanksOf = B.ui.blanksOf,
      unknownNote = B.ui.unknownNote, modelChoice = B.ui.modelChoice;
  var KINDS = B.KINDS = B.KINDS || {};  // kind -> its renderer (mlm_lib/book/model_controls.py)

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
})(window.BertLive = window.BertLive || {});

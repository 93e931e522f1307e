// Site only. The book's model in the reader's browser, part 4 of 7: what each position reads
// (chapter 7: any layer and head's attention; chapter 8: the same blank under BERT's and a causal mask).
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: bert-live-model.js, bert-live-ui.js. Gives BertLive.KINDS.
(function (B) {
  "use strict";
  var tokenizer = B.tokenizer, run = B.run, topK = B.topK;
  var el = B.ui.el, textBox = B.ui.textBox, choice = B.ui.choice, table = B.ui.table, fmt = B.ui.fmt,
      readSentence = B.ui.readSentence, blanksOf = B.ui.blanksOf, unknownNote = B.ui.unknownNote,
      modelChoice = B.ui.modelChoice;
  var KINDS = B.KINDS = B.KINDS || {};  // kind -> its renderer (mlm_lib/book/model_controls.py)

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
})(window.BertLive = window.BertLive || {});

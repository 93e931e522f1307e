// Site only. The book's model in the reader's browser, part 6 of 7: the heads on [CLS]
// (chapter 11: the NSP head on a pair; chapter 12: the fine-tuned classifiers on a sentence).
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: bert-live-model.js, bert-live-ui.js. Gives BertLive.KINDS.
(function (B) {
  "use strict";
  var tokenizer = B.tokenizer, run = B.run, classify = B.classify;
  var el = B.ui.el, textBox = B.ui.textBox, choice = B.ui.choice, table = B.ui.table,
      checkLength = B.ui.checkLength, readSentence = B.ui.readSentence, unknownNote = B.ui.unknownNote;
  var KINDS = B.KINDS = B.KINDS || {};  // kind -> its renderer (mlm_lib/book/model_controls.py)

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
})(window.BertLive = window.BertLive || {});

// Site only. The book's model in the reader's browser, part 5 of 7: BERT as a writer (chapter 8).
// Classic scripts, loaded in this order by _config.yml (html_js_files): bert-live-model.js,
// bert-live-ui.js, the controls (bert-live-blanks.js, bert-live-attention.js,
// bert-live-generate.js, bert-live-heads.js), then bert-live.js, which mounts them. They share
// one global, window.BertLive.
// Needs: bert-live-model.js, bert-live-ui.js. Gives BertLive.KINDS, leftToRight, refill.
(function (B) {
  "use strict";
  var run = B.run, topK = B.topK;
  var el = B.ui.el, textBox = B.ui.textBox, choice = B.ui.choice, slider = B.ui.slider,
      bannedIds = B.ui.bannedIds, readSentence = B.ui.readSentence, unknownNote = B.ui.unknownNote,
      modelChoice = B.ui.modelChoice;
  var KINDS = B.KINDS = B.KINDS || {};  // kind -> its renderer (mlm_lib/book/model_controls.py)

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

  B.leftToRight = leftToRight; B.refill = refill;
})(window.BertLive = window.BertLive || {});

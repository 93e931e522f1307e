"""The book's model in the reader's browser (book/static/bert-live.js) on the built site, in chromium.

The browser tokenizes with tokenizers.js and runs the exported model with onnxruntime-web; both
must give what mlm_lib gives: the same token ids, fill-mask's top 5 and their probabilities, the
attention probabilities and the NSP probabilities, on held-out sentences no other test uses. Every
model control on every chapter page answers, changes its answer when moved or typed into, and
answers bad input with a message; and no request leaves 127.0.0.1. The checks of a chapter page run on
its one visit (conftest.site_pages), after test_site.py's and before test_site_live.py's.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from browser import DESKTOP, move_control
from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.book.browser_model import SECOND_MODEL, second_browser_model
from mlm_lib.book.chapter_models import load_chapter_model
from mlm_lib.book.second_model import ENCODER_LICENCE, regrown_tokenizer
from mlm_lib.corpus import load_wikipedia, train_valid_split
from mlm_lib.finetune import predict
from mlm_lib.inference import attention_probs, fill_mask
from mlm_lib.numerics import tolerance

# Probabilities agree to 1e-4: float32 through two engines (onnxruntime's kernels and PyTorch's)
# differ by rounding, ~1e-6 here; a wrong weight or a missed LayerNorm moves them by far more.
PROB_TOL = 1e-4
N_SENTENCES = 20
FIRST_SENTENCE = 200  # held-out sentences from here on: no other test reads them
CHAPTERS = ["01_words_and_symbols", "02_vocabulary_softmax", "05_masked_only_sum",
            "06_corrupting_the_input", "07_inside_bert", "08_both_directions", "09_wordpiece",
            "10_pretraining", "11_next_sentence_prediction", "12_fine_tuning"]


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    """Held-out sentences with their fourth piece replaced by [MASK], short enough for the model."""
    tok = book_model_tokenizer()
    _, valid = train_valid_split(load_wikipedia())
    out = []
    for s in [s for d in valid for s in d.sentences][FIRST_SENTENCE:]:
        words = s.split()
        if 6 <= len(words) and len(tok.encode(s).input_ids) <= 40:
            words[3] = "[MASK]"
            out.append(" ".join(words))
        if len(out) == N_SENTENCES:
            return out
    raise AssertionError("too few held-out sentences")


@pytest.fixture
def page(site_pages):
    """A chapter's shared visit (conftest.site_pages); at the end, no request left 127.0.0.1, none
    failed and nothing was logged as an error during the visit."""
    visits = []

    def _open(chapter: str):
        visit = site_pages.visit(f"notebooks/{chapter}.html")
        visits.append(visit)
        return visit.page

    yield _open
    for visit in visits:
        assert not visit.problems(), f"{visit.rel}: {visit.problems()[:5]}"


RUN_ALL = """async (texts) => {
  const tok = await BertLive.tokenizer();
  const out = [];
  for (const t of texts) {
    const enc = tok.encode(t);
    const r = await BertLive.run(enc);
    const blank = enc.tokens.indexOf("[MASK]");
    const e = r.nsp.map(Math.exp), z = e[0] + e[1];
    out.push({ids: enc.ids, blank,
              top: BertLive.topK(r.logProbs[blank], tok.vocab, 5).map(c => [c.token, c.p]),
              attention: r.attentions.map(l => l.map(h => h.map(row => Array.from(row)))),
              nsp: [e[0] / z, e[1] / z]});
  }
  return out;
}"""


@pytest.mark.on_page("notebooks/10_pretraining.html")
def test_the_browser_model_computes_what_mlm_lib_computes(page, sentences):
    p = page("10_pretraining")
    got = p.evaluate(RUN_ALL, sentences)
    model, tok = book_model(), book_model_tokenizer()
    worst = {"p": 0.0, "attention": 0.0, "nsp": 0.0}
    for text, g in zip(sentences, got):
        assert g["ids"] == tok.encode(text).input_ids, text
        (expected,) = fill_mask(model, tok, text, top_k=5)
        assert [t for t, _ in g["top"]] == expected.tokens, text
        worst["p"] = max(worst["p"], max(abs(a - b) for (_, a), b in zip(g["top"], expected.probs)))
        _, att = attention_probs(model, tok, text)
        worst["attention"] = max(worst["attention"], float((torch.tensor(g["attention"]) - att).abs().max()))
        with torch.no_grad():
            nsp = model(torch.tensor([tok.encode(text).input_ids])).nsp_logits.softmax(-1)[0]
        worst["nsp"] = max(worst["nsp"], float((torch.tensor(g["nsp"]) - nsp).abs().max()))
    print(f"book model, {len(sentences)} held-out sentences, largest differences: {worst}")
    assert all(v <= PROB_TOL for v in worst.values()), worst


RUN_SECOND = """async (texts) => {
  const tok = await BertLive.tokenizer("bert-base-uncased");
  const out = [];
  for (const t of texts) {
    const enc = tok.encode(t);
    const r = await BertLive.run(enc, false, "second-model");
    const blank = enc.tokens.indexOf("[MASK]");
    out.push({ids: enc.ids, nsp: r.nsp,
              top: BertLive.topK(r.logProbs[blank], tok.vocab, 5).map(c => [c.token, c.p]),
              attention: r.attentions.map(l => l.map(h => h.map(row => Array.from(row))))});
  }
  return out;
}"""


@pytest.mark.on_page("notebooks/10_pretraining.html")
def test_the_browser_runs_the_second_model_as_mlm_lib_runs_its_int8_rounding(page, sentences):
    """The same check for the second model, against mlm_lib with the same int8-rounded matrices
    (mlm_lib.book.browser_model.second_browser_model): both compute in float32. Its logits reach
    about 20, where the book's stay near 10, and WebAssembly's kernels round differently from
    PyTorch's: each P is allowed the library's rounding tolerance of its logits (mlm_lib.numerics),
    twice (log P is a logit less a log-sum-exp), where 1e-4 would be too tight and int8 rounding
    itself moves P by up to 5e-3."""
    p = page("10_pretraining")
    got = p.evaluate(RUN_SECOND, sentences)
    model, tok = second_browser_model(), regrown_tokenizer()
    worst = {"p": 0.0, "attention": 0.0}
    for text, g in zip(sentences, got):
        ids = tok.encode(text).input_ids
        assert g["ids"] == ids, text
        assert g["nsp"] is None, "the second model has no trained NSP head, and exports none"
        (expected,) = fill_mask(model, tok, text, top_k=5)
        assert [t for t, _ in g["top"]] == expected.tokens, text
        with torch.no_grad():
            logits = model(torch.tensor([ids])).mlm_logits[0, ids.index(tok.mask_id)]
        p_diff = max(abs(a - b) for (_, a), b in zip(g["top"], expected.probs))
        worst["p"] = max(worst["p"], p_diff / (2 * tolerance(logits)))
        _, att = attention_probs(model, tok, text)
        worst["attention"] = max(worst["attention"], float((torch.tensor(g["attention"]) - att).abs().max()) / PROB_TOL)
    print(f"second model, {len(sentences)} held-out sentences, largest differences as shares of "
          f"their tolerance: {worst}")
    assert all(v <= 1 for v in worst.values()), worst


def _model_files(p) -> list[str]:
    return p.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)"
                      ".filter(u => u.includes('/_static/model/') && u.endsWith('.onnx'))")


def test_the_second_model_downloads_only_when_chosen_and_says_what_it_is(server, browser):
    """On a page of its own (a fresh profile): the menu states the download before it starts; the
    answer names the model, what it is not, and its licence; a long text gets the second model's
    own limit."""
    context = browser.new_context(viewport=DESKTOP)
    try:
        p = context.new_page()
        p.goto(server + "notebooks/10_pretraining.html", wait_until="load")
        root = p.locator('.bert-live[data-kind="fill-mask"]')
        _first_answer(p, root)
        status = root.locator(".bert-live-status")
        assert "the book's model" in status.inner_text()
        menu = root.locator("select")
        p.wait_for_function("s => /MB to download/.test(s.options[1].textContent)", arg=menu.element_handle())
        size = float(re.search(r"([\d.]+) MB", menu.locator("option").nth(1).inner_text()).group(1))
        assert not [u for u in _model_files(p) if SECOND_MODEL in u], "downloaded before it was chosen"
        n = root.get_attribute("data-answered")
        menu.select_option("second")
        _answer(p, root, n)
        answer = status.inner_text()
        for words in ("in your browser", "regrown MLM head", "not BERT as Google trained it", ENCODER_LICENCE):
            assert words in answer, (words, answer)
        loaded = [u for u in _model_files(p) if SECOND_MODEL in u]
        assert len(loaded) == 1, loaded
        transferred = p.evaluate("u => performance.getEntriesByName(u)[0].encodedBodySize", loaded[0])
        assert abs(transferred / 1e6 - size) <= 0.05, (transferred, size)
        box = root.locator("input[type=text]").first
        n = root.get_attribute("data-answered")
        box.fill(" ".join(["the"] * 600) + " [MASK]")
        assert "at most 512" in _answer(p, root, n)
    finally:
        context.close()


@pytest.mark.on_page("notebooks/07_inside_bert.html")
def test_the_attention_control_offers_the_second_models_layers_and_heads(page):
    p = page("07_inside_bert")
    root = p.locator('.bert-live[data-kind="attention"]')
    _first_answer(p, root)
    selects = root.locator("select")
    for model, says, layers_heads in (("second", "regrown MLM head", [6, 12]),
                                      ("book", "the book's model", [2, 2])):
        n = root.get_attribute("data-answered")
        selects.nth(0).select_option(model)
        _answer(p, root, n)
        assert says in root.locator(".bert-live-status").inner_text()
        counts = [selects.nth(k).locator("option").count() for k in (1, 2)]
        assert counts == layers_heads, (model, counts)


RUN_PAIRS = """async (pairs) => {
  const tok = await BertLive.tokenizer();
  const out = [];
  for (const [a, b] of pairs) {
    const enc = tok.encode(a, b);
    const e = (await BertLive.run(enc, false, "nsp")).nsp.map(Math.exp);
    out.push({ids: enc.ids, types: enc.types, p: e[0] / (e[0] + e[1])});
  }
  return out;
}"""

RUN_CLASSIFIER = """async ([texts, name]) => {
  const tok = await BertLive.tokenizer();
  const out = [];
  for (const t of texts) out.push((await BertLive.classify(tok.encode(t), name)).map(c => [c.label, c.p]));
  return out;
}"""


@pytest.mark.on_page("notebooks/11_next_sentence_prediction.html")
def test_the_browser_runs_chapter_11s_nsp_head_as_mlm_lib_does(page, sentences):
    p = page("11_next_sentence_prediction")
    model, tok = load_chapter_model("nsp"), book_model_tokenizer()
    texts = [s.replace("[MASK]", "the") for s in sentences]
    # every held-out sentence as A, with the shortest of the others that fits as B
    pairs = [(a, min((b for b in texts if b != a), key=len)) for a in texts]
    assert all(len(tok.encode(a, pair=b).input_ids) <= model.config.max_position_embeddings for a, b in pairs)
    got = p.evaluate(RUN_PAIRS, pairs)
    worst = 0.0
    for (a, b), g in zip(pairs, got):
        enc = tok.encode(a, pair=b)
        assert (g["ids"], g["types"]) == (enc.input_ids, enc.token_type_ids), (a, b)
        with torch.no_grad():
            out = model(torch.tensor([enc.input_ids]), torch.tensor([enc.token_type_ids]))
        worst = max(worst, abs(g["p"] - float(out.nsp_logits.softmax(-1)[0, 0])))
    print(f"chapter 11's NSP head, {len(pairs)} held-out pairs: largest |dP(IsNext)| {worst:.2e}")
    assert worst <= PROB_TOL, worst


@pytest.mark.on_page("notebooks/12_fine_tuning.html")
@pytest.mark.parametrize("name", ["classifier-pretrained", "classifier-random"])
def test_the_browser_runs_chapter_12s_classifiers_as_mlm_lib_does(page, sentences, name):
    p = page("12_fine_tuning")
    texts = [s.replace("[MASK]", "the") for s in sentences]
    got = p.evaluate(RUN_CLASSIFIER, [texts, name])
    model, tok = load_chapter_model(name), book_model_tokenizer()
    expected = predict(model, tok, texts)
    assert [[label for label, _ in g] for g in got] == [model.label_names] * len(texts)
    worst = float((torch.tensor([[q for _, q in g] for g in got]) - expected).abs().max())
    print(f"{name}, {len(texts)} held-out sentences: largest |dP(label)| {worst:.2e}")
    assert worst <= PROB_TOL, worst


def _answer(p, root, n: str) -> str:
    """Wait for the control's answer after answer number ``n`` and return its text."""
    p.wait_for_function("([r, n]) => r.getAttribute('data-answered') !== n", arg=[root.element_handle(), n])
    return root.inner_text()


def _first_answer(p, root) -> str:
    root.scroll_into_view_if_needed()
    p.wait_for_function("r => r.hasAttribute('data-answered')", arg=root.element_handle())
    return root.inner_text()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_model_control_answers_and_follows_its_input(page, chapter):
    p = page(chapter)
    roots = p.locator(".bert-live[data-kind]")
    assert roots.count(), f"{chapter}: no model control"
    for k in range(roots.count()):
        root = roots.nth(k)
        kind = root.get_attribute("data-kind")
        first = _first_answer(p, root)
        assert "in your browser" in first, f"{chapter} {kind}: {first}"
        # the kernel's copy of the control is hidden on the site
        assert root.evaluate("r => [...r.closest('.cell_output').children]"
                             ".every(c => c.contains(r) || getComputedStyle(c).display === 'none')")
        for control in _controls_of(root):
            before = root.locator(".bert-live-result").inner_text()
            n = root.get_attribute("data-answered")
            _move(root, control)
            after = _answer(p, root, n)
            assert root.locator(".bert-live-result").inner_text() != before, f"{chapter} {kind}: {control}"
            assert "in your browser" in after, f"{chapter} {kind} {control}: {after}"


def _controls_of(root) -> list[str]:
    return root.evaluate("""r => [...r.querySelectorAll('.bert-live-controls input, .bert-live-controls select,'
                                     + ' .bert-live-tokens button:not([disabled])')]
                                  .slice(0, 4).map((e, i) => e.tagName + ':' + (e.type || '') + ':' + i)""")


def _move(root, control: str) -> None:
    index = int(control.split(":")[2])
    move_control(root.locator(".bert-live-controls input, .bert-live-controls select, "
                              ".bert-live-tokens button:not([disabled])").nth(index))


BAD_INPUT = [("", "empty"), ("the river was wide .", "no [MASK]"),
             (" ".join(["the"] * 80) + " [MASK]", "at most 64"), ("東京 ☃ [MASK] ⚡", "[UNK]")]


@pytest.mark.on_page("notebooks/10_pretraining.html")
@pytest.mark.parametrize("text, message", BAD_INPUT, ids=[m for _, m in BAD_INPUT])
def test_bad_input_gets_a_message_and_the_page_keeps_working(page, text, message):
    p = page("10_pretraining")
    root = p.locator('.bert-live[data-kind="fill-mask"]')
    _first_answer(p, root)
    menu = root.locator("select")
    if menu.input_value() != "book":  # another check of the shared visit chose the second model
        n = root.get_attribute("data-answered")
        menu.select_option("book")
        _answer(p, root, n)
    box = root.locator("input[type=text]").first
    n = root.get_attribute("data-answered")
    box.fill(text)
    assert message in _answer(p, root, n)
    n = root.get_attribute("data-answered")
    box.fill("the [MASK] crossed the river .")
    assert "in your browser" in _answer(p, root, n)


@pytest.mark.on_page("notebooks/03_the_log.html")
def test_pages_without_a_model_control_load_no_model(page):
    p = page("03_the_log")  # open since its other checks ran, or opened now
    p.wait_for_timeout(500)
    loaded = p.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
    assert not [u for u in loaded if re.search(r"/_static/(ort|model|tokenizers)/", u)], loaded


def test_the_model_loads_only_when_a_control_is_in_view(server, browser):
    """On a page of its own: the shared visit has long since scrolled to every control."""
    context = browser.new_context(viewport=DESKTOP)
    try:
        p = context.new_page()
        p.goto(server + "notebooks/10_pretraining.html", wait_until="load")
        p.wait_for_timeout(1500)
        loaded = p.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
        assert not [u for u in loaded if "book-model.onnx" in u], "the model loaded before its control was in view"
        root = p.locator('.bert-live[data-kind="fill-mask"]')
        assert "in your browser" in _first_answer(p, root)
        assert json.dumps(root.inner_text())
    finally:
        context.close()


# The generate control's own two ways of writing (bert-live.js), asked for pieces; ``second``: by
# the second model (on BERT-base's vocabulary) instead of the book's.
GENERATE = """async ([prompt, n, rounds, second]) => {
  const tok = await BertLive.tokenizer(second ? "bert-base-uncased" : "book");
  const name = second ? "second-model" : undefined;
  const ids = tok.encode(prompt).ids.slice(0, -1);  // [CLS] prompt, without [SEP]
  const out = rounds ? await BertLive.refill(tok, ids, n, rounds, undefined, name)
                     : await BertLive.leftToRight(tok, ids, n, undefined, name);
  return out.map(i => tok.vocab[i]);
}"""


@pytest.mark.on_page("notebooks/08_both_directions.html")
@pytest.mark.parametrize("prompt", ["the history of the city", "in 1861 the president", "he was born in"])
def test_the_browser_generates_what_mlm_lib_generates(page, prompt):
    from mlm_lib.causal import generate_by_refilling, generate_left_to_right

    p = page("08_both_directions")
    model, tok = book_model(), book_model_tokenizer()
    assert p.evaluate(GENERATE, [prompt, 8, 0, False]) == generate_left_to_right(model, tok, prompt, num_tokens=8)
    for rounds in (1, 4, 8):
        assert p.evaluate(GENERATE, [prompt, 8, rounds, False]) == generate_by_refilling(
            model, tok, prompt, num_tokens=8, iterations=rounds), f"mask-predict, {rounds} rounds"


@pytest.mark.on_page("notebooks/08_both_directions.html")
@pytest.mark.parametrize("prompt", ["the history of the city", "in 1861 the president"])
def test_the_browser_generates_with_the_second_model_what_mlm_lib_generates(page, prompt):
    from mlm_lib.causal import generate_by_refilling, generate_left_to_right

    p = page("08_both_directions")
    model, tok = second_browser_model(), regrown_tokenizer()
    assert p.evaluate(GENERATE, [prompt, 8, 0, True]) == generate_left_to_right(model, tok, prompt, num_tokens=8)
    assert p.evaluate(GENERATE, [prompt, 8, 4, True]) == generate_by_refilling(
        model, tok, prompt, num_tokens=8, iterations=4)


def test_a_browser_without_webassembly_is_told_so(server, browser):
    context = browser.new_context()
    context.add_init_script("delete window.WebAssembly")
    p = context.new_page()
    try:
        p.goto(server + "notebooks/10_pretraining.html", wait_until="load")
        root = p.locator('.bert-live[data-kind="fill-mask"]')
        assert "no WebAssembly" in _first_answer(p, root)
        assert p.locator(".recall").count(), "the rest of the page (its recall widgets) is still there"
    finally:
        context.close()

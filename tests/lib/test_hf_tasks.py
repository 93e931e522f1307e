"""The tagger, the span head and the classifier of mlm_lib give the same scores as transformers'
BertForTokenClassification, BertForQuestionAnswering and BertForSequenceClassification loaded
from the same weights (written by mlm_lib.hf_tasks)."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from mlm_lib.config import BertConfig  # noqa: E402
from mlm_lib.finetune import BertClassifier  # noqa: E402
from mlm_lib.hf_tasks import hf_task_state_dict, save_hf_task_model  # noqa: E402
from mlm_lib.numerics import assert_same_function  # noqa: E402
from mlm_lib.tasks import BertSpanHead, BertTokenClassifier  # noqa: E402
from padded import padded_batch as make_padded_batch  # noqa: E402

transformers.logging.set_verbosity_error()

CONFIG = BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=96, max_position_embeddings=40)


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(3)
    ids, types, mask, _ = make_padded_batch(g, T=16, V=120, lengths=[16, 12, 7, 3])
    return ids, types, mask


def _load(cls, folder):
    return getattr(transformers, cls).from_pretrained(folder, attn_implementation="eager").eval()


def test_token_classifier_parity(batch, tmp_path):
    ours = BertTokenClassifier.from_scratch(CONFIG, num_labels=3, seed=1).eval()
    save_hf_task_model(ours, tmp_path)
    hf = _load("BertForTokenClassification", tmp_path)
    ids, types, mask = batch
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
        out = ours(ids, types, mask)
    real = mask.bool()
    assert_same_function(out[real], ref[real], "token logits")


def test_span_head_parity_over_segment_b(batch, tmp_path):
    ours = BertSpanHead.from_scratch(CONFIG, seed=2).eval()
    save_hf_task_model(ours, tmp_path)
    assert "qa_outputs.weight" in hf_task_state_dict(ours)
    assert not any(k.startswith("bert.pooler") for k in hf_task_state_dict(ours))
    hf = _load("BertForQuestionAnswering", tmp_path)
    ids, types, mask = batch
    context = types * mask  # B's real positions: ours are set to the lowest float elsewhere
    with torch.no_grad():
        ref = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
        start, end = ours(ids, types, mask, context)
    b = context.bool()
    assert b.sum() > 0
    assert_same_function(start[b], ref.start_logits[b], "start")
    assert_same_function(end[b], ref.end_logits[b], "end")
    assert (start[~b] == torch.finfo(start.dtype).min).all()


def test_sequence_classifier_parity_keeps_the_pooler(batch, tmp_path):
    ours = BertClassifier.from_scratch(CONFIG, num_labels=2, seed=3).eval()
    save_hf_task_model(ours, tmp_path)
    assert "bert.pooler.dense.weight" in hf_task_state_dict(ours)
    hf = _load("BertForSequenceClassification", tmp_path)
    ids, types, mask = batch
    with torch.no_grad():
        assert_same_function(ours(ids, types, mask), hf(input_ids=ids, token_type_ids=types,
                                                        attention_mask=mask).logits)


def test_a_head_without_a_layout_is_refused():
    with pytest.raises(ValueError, match="no Hugging Face layout"):
        hf_task_state_dict(torch.nn.Linear(2, 2))

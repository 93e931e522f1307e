"""``training_arguments`` tells 🤗 ``Trainer`` the recipe ``mlm_lib.finetune`` runs: the settings,
the optimiser (its betas, epsilon and which weights decay) and the schedule, whose one difference is
pinned here so that a change on either side is seen."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig as HFBertConfig
from transformers import BertForSequenceClassification, Trainer

from mlm_lib.book.book_model import book_model
from mlm_lib.book.trainer_args import training_arguments
from mlm_lib.finetune import BertClassifier, FinetuneConfig
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer

STEPS = 90  # chapter 13's tagger: 3 epochs of 30 batches


def _trainer(cfg: FinetuneConfig, model: torch.nn.Module) -> Trainer:
    trainer = Trainer(model=model, args=training_arguments(cfg))
    trainer.create_optimizer_and_scheduler(num_training_steps=STEPS)
    return trainer


def test_the_settings_are_the_configs():
    cfg = FinetuneConfig(epochs=2, batch_size=8, lr=3e-4, warmup_fraction=0.2, weight_decay=0.05,
                         clip_grad_norm=0.5, seed=7)
    args = training_arguments(cfg)
    assert (args.num_train_epochs, args.per_device_train_batch_size, args.learning_rate,
            args.warmup_steps, args.weight_decay, args.max_grad_norm, args.seed) == (
        2, 8, 3e-4, 0.2, 0.05, 0.5, 7)
    assert training_arguments(FinetuneConfig(clip_grad_norm=None)).max_grad_norm == 0.0  # no clipping
    assert str(training_arguments(cfg, eval_strategy="epoch").eval_strategy.value) == "epoch"


def test_the_optimiser_is_finetunes():
    """Same AdamW hyper-parameters, and the same number of weights decayed: biases and LayerNorm
    are left undecayed by both (transformers' sentence classifier against the library's, one architecture)."""
    cfg = FinetuneConfig()
    ours = BertClassifier.from_pretraining(book_model(), num_labels=3)
    c = book_model().config
    theirs = BertForSequenceClassification(HFBertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings, num_labels=3))
    hf_opt = _trainer(cfg, theirs).optimizer
    lib_opt = build_optimizer(ours, cfg.lr, cfg.weight_decay)
    assert isinstance(hf_opt, torch.optim.AdamW)
    for key in ("betas", "eps"):
        assert hf_opt.defaults[key] == lib_opt.defaults[key]

    def decayed(opt: torch.optim.Optimizer) -> int:
        return sum(p.numel() for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"])

    # transformers keeps Q, K and V as three matrices where the library fuses them: same elements
    assert decayed(hf_opt) == decayed(lib_opt) > 0
    assert {g["weight_decay"] for g in hf_opt.param_groups} == {0.0, cfg.weight_decay}


def test_the_schedules_warm_as_long_and_end_at_zero_but_peak_differently():
    cfg = FinetuneConfig(lr=5e-4)
    trainer = _trainer(cfg, torch.nn.Linear(2, 2))
    lib_opt = build_optimizer(torch.nn.Linear(2, 2), cfg.lr)
    schedule = WarmupLinearSchedule(lib_opt, int(cfg.warmup_fraction * STEPS), STEPS)
    hf, lib = [], []
    for _ in range(STEPS):
        hf.append(trainer.optimizer.param_groups[0]["lr"])
        lib.append(lib_opt.param_groups[0]["lr"])
        for opt, step in ((trainer.optimizer, trainer.lr_scheduler.step), (lib_opt, schedule.step)):
            opt.step()
            step()
    warm = int(cfg.warmup_fraction * STEPS)
    assert hf.index(max(hf)) == warm and lib.index(max(lib)) == warm - 1  # the same warm-up
    assert max(hf) == pytest.approx(cfg.lr)
    assert max(lib) == pytest.approx(cfg.lr * (1 - (warm - 1) / STEPS))  # BERT's decay from step 0
    assert hf[0] == 0.0 and lib[0] == pytest.approx(cfg.lr / warm)
    assert hf[-1] < 1e-5 and lib[-1] < 1e-5

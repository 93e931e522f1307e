"""``mlm_lib``'s fine-tuning recipe as 🤗 ``TrainingArguments``, so that a ``Trainer`` cell (chapter
13's second page) runs the recipe a :class:`~mlm_lib.finetune.FinetuneConfig` describes.

What :func:`~mlm_lib.finetune.finetune` does and ``Trainer`` is told: the epochs, batch size and
rate; AdamW with :func:`~mlm_lib.optim.build_optimizer`'s betas and epsilon and its weight decay,
which both libraries leave off biases and LayerNorm; gradients clipped to ``clip_grad_norm``; a
linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0. One detail of the
schedule differs: ``Trainer`` warms from 0 and decays from the end of the warm-up, reaching the full
rate, while :class:`~mlm_lib.optim.WarmupLinearSchedule` decays over the whole run (as BERT's
``optimization.py`` does after its warm-up) and multiplies the warm-up by that decay too (the
library's own choice), so at a 10% warm-up its highest rate is about 0.91 of ``lr``. Seed for
seed the two libraries' runs also differ in the new layer's first weights, the data order and
dropout (0.1 before ``mlm_lib``'s head; the book's folder's config sets 0 for 🤗's). Nothing is saved during training and no progress is drawn: a chapter's output
shows results, not a bar.
"""

from __future__ import annotations

import inspect
import tempfile
from typing import Any

from mlm_lib.finetune import FinetuneConfig
from mlm_lib.optim import build_optimizer

_OPTIMIZER_DEFAULTS = inspect.signature(build_optimizer).parameters
ADAM_BETAS: tuple[float, float] = _OPTIMIZER_DEFAULTS["betas"].default
ADAM_EPS: float = _OPTIMIZER_DEFAULTS["eps"].default


def training_arguments(cfg: FinetuneConfig, **overrides: Any) -> Any:
    """``transformers.TrainingArguments`` for ``cfg`` (its seed included), on the CPU (the book's
    models gain nothing from a GPU; ``use_cpu=False`` overrides it), writing into a fresh temporary
    folder; ``overrides`` are passed on (``eval_strategy="epoch"``, say)."""
    from transformers import TrainingArguments  # the [hf] extra: only the Trainer cells need it

    settings = dict(
        num_train_epochs=cfg.epochs, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr, warmup_steps=cfg.warmup_fraction,  # a float below 1: a fraction
        weight_decay=cfg.weight_decay, max_grad_norm=cfg.clip_grad_norm or 0.0,
        adam_beta1=ADAM_BETAS[0], adam_beta2=ADAM_BETAS[1], adam_epsilon=ADAM_EPS, seed=cfg.seed,
        output_dir=tempfile.mkdtemp(), save_strategy="no", report_to="none", use_cpu=True,
        disable_tqdm=True)
    return TrainingArguments(**{**settings, **overrides})

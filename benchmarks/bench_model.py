"""Training speed of mlm_lib's BERT against Hugging Face's BertForPreTraining, on CPU in fp32.

One step = forward + backward + AdamW update, on the same config, the same weights, the same batch
and the same optimizer settings: 4 layers, hidden 256, 4 heads, intermediate 1024, vocabulary
30522, batch 16 x 128, 15% of positions masked, dropout 0.1 (training mode), two segments.
Both models run in one process, alternating, with 2 threads. Before timing, the script checks that
both give the same loss from the same weights (eval mode, so dropout does not differ).

Usage: python benchmarks/bench_model.py [--rounds 15]
The last line printed is ``speedup: X.XX`` (mlm_lib tokens/s divided by transformers tokens/s).

What each change gave (this 2-core machine, tokens/s of mlm_lib over transformers' SDPA default):
(measured while other jobs loaded the machine, load average 5-12 on 2 cores, so the figures are
noisy; alternating single steps and taking medians keeps the comparison fair but not quiet)
- Both sides use AdamW(fused=True): one pass over the 11M parameters instead of foreach's several.
  Alone, the step over these parameters took 0.05-0.08 s fused against 0.18-0.38 s foreach. Same
  settings on both sides, so it only removes a cost they share (which raises the ratio a little).
- Masked-only vocabulary projection (gather the rows of M, then project): the big one. The
  [2048, 30522] logits (and their log-softmax and gradients) become [~300, 30522].
- SDPA fast path, fused QKV (one Linear of width 3H), the additive mask built once per forward
  and skipped when nothing is padded: small each, not separable from noise here. In training mode
  with dropout, CPU SDPA falls back to its math kernel, so it is close to the explicit path.
- With 1 thread (less sensitive to the load than 2 threads waiting on each other), medians of
  alternating steps: transformers 292-303 tokens/s, mlm_lib with the above 842-889 (2.9-3.0x).
- The last layer on the rows of M and [CLS] only (the training path of ``BertForPreTraining``;
  same logits and gradients): 969 tokens/s in the same run, 3.2x.
- With 2 threads at load average ~10, the same code gave only 2.25x: threads that wait on each
  other at every op suffer more in the model with smaller ops. Run it on a quiet machine.
- Before the next change, on a nearly idle machine: 1,011 against 2,796 tokens/s, 2.77x.
- The fused loss (``mlm_lib.loss.masked_nll``, on the training path): a profile showed the [304, 30522]
  scores costing ~40% of a step even after the masked-only gather: the projection, log-softmax,
  NLL's zero-filled gradient, their backward and copies each made a pass over 9.3M floats. The
  fused function computes the scores as [V, |M|] (35% faster for this product on this CPU), takes
  max and arg-max in one pass, exponentiates once in place and keeps softmax - one-hot as the
  gradient, so backward is just the two matrix products. Same loss to 1e-6, same gradients.
  Nearly idle machine: transformers 1,002 tokens/s, mlm_lib 3,332 tokens/s, 3.33x.
- mlm_lib 0.2 moved the two training shortcuts out of the model into ``mlm_lib.fast_paths`` (the
  model's ``forward`` is now the plain path the chapters print) and added the plain path to this
  benchmark. Same run, alternating: transformers 1,545-1,613 tokens/s, mlm_lib's training path
  4,880-5,237 (3.13-3.25x, against 3.03-3.20x for 0.1 measured the same way), the plain path
  (masked-only logits, no shortcuts) 3,902-4,202 (2.49-2.60x).
- The two shortcuts went back into the model as its training path (``BertForPreTraining.forward``
  with ``targets``; the plain path is the same ``forward`` without them). Old against new training
  path, same weights, alternating steps, CPU time, 2 threads at load average ~11: medians
  3.93 against 3.88 s per step (1.01x; another run 0.95x), the same speed within the noise.
- The fused loss lays its scores out [|M|, V] again, and the library's AdamW is fused on the CPU
  too: on a 2-core AMD EPYC the [V, |M|] layout's max over columns was the slowest part of the
  loss (``benchmarks/bench_masked_nll.py`` compares the two layouts).
- Not done: the tied embedding's gradient is still a dense [V, H] zero-fill plus an add (about
  3% of a step); a sparse embedding gradient would remove it but breaks optimizers when the
  decoder is not used (fine-tuning).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from mlm_lib.hf import load_hf_bert  # noqa: E402
from mlm_lib.loss import IGNORE_INDEX, mlm_loss, nsp_loss  # noqa: E402

B, T, V = 16, 128, 30522
SIZES = dict(vocab_size=V, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
             intermediate_size=1024)


def make_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """[CLS] A [SEP] B [SEP] rows of random ids, 15% of the non-special positions masked."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, V, (B, T), generator=g)
    ids[:, 0], ids[:, T // 2 - 1], ids[:, -1] = 101, 102, 102  # [CLS], [SEP], [SEP]
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, T // 2:] = 1
    special = torch.zeros(B, T, dtype=torch.bool)
    special[:, [0, T // 2 - 1, T - 1]] = True
    scores = torch.rand(B, T, generator=g).masked_fill(special, 2.0)
    k = round(0.15 * T)
    masked = torch.zeros(B, T, dtype=torch.bool).scatter(1, scores.topk(k, largest=False).indices, True)
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    corrupted = ids.masked_fill(masked, 103)  # [MASK]
    is_next = torch.randint(0, 2, (B,), generator=g)
    return dict(input_ids=corrupted, token_type_ids=token_type_ids,
                attention_mask=torch.ones(B, T, dtype=torch.long), labels=labels, masked=masked,
                is_next=is_next)


def main() -> None:
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed steps per model")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)

    hf = transformers.BertForPreTraining(transformers.BertConfig(**SIZES))
    with tempfile.TemporaryDirectory() as folder:
        hf.save_pretrained(folder)
        ours = load_hf_bert(folder)
    batch = make_batch()
    masked = batch["masked"]

    def hf_loss() -> torch.Tensor:
        return hf(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                  attention_mask=batch["attention_mask"], labels=batch["labels"],
                  next_sentence_label=1 - batch["is_next"]).loss

    targets = batch["labels"][masked]
    plain = copy.deepcopy(ours)

    def our_loss() -> torch.Tensor:  # the training path: forward with targets
        out = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                   masked_positions=masked, targets=targets)
        return out.mlm_nll.mean() + nsp_loss(out.nsp_logits, batch["is_next"])

    def plain_loss() -> torch.Tensor:  # the plain path the chapters print
        out = plain(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                    masked_positions=masked)
        return mlm_loss(out.mlm_logits, targets) + nsp_loss(out.nsp_logits, batch["is_next"])

    hf.eval(), ours.eval(), plain.eval()
    with torch.no_grad():
        a, b = hf_loss().item(), our_loss().item()
    print(f"same weights, same batch: transformers loss {a:.6f}, mlm_lib loss {b:.6f}")
    if abs(a - b) > 1e-4:
        raise SystemExit(f"losses differ by {abs(a - b):.2e}: the comparison would not be fair")
    hf.train(), ours.train(), plain.train()

    def stepper(model: torch.nn.Module, loss_fn):
        # Same optimizer settings on both sides.
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)

        def step() -> None:
            loss_fn().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    runs = {"transformers": stepper(hf, hf_loss), "mlm_lib": stepper(ours, our_loss),
            "mlm_lib plain path": stepper(plain, plain_loss)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for step in runs.values():  # warm-up: allocator, optimizer state
        step()
    # One step each, alternating (and swapping who goes first), so that anything else running on
    # the machine slows both alike; the median step time ignores the odd hiccup.
    for r in range(args.rounds):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            start, start_cpu = time.perf_counter(), time.process_time()
            runs[name]()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    rate = {name: B * T / statistics.median(t) for name, t in times.items()}
    for name, r in rate.items():
        # CPU time (all threads) is less sensitive than wall time to other programs on the machine.
        per_cpu_s = B * T / statistics.median(cpu[name])
        print(f"{name}: {r:,.0f} tokens/s (median of {args.rounds} steps; "
              f"{per_cpu_s:,.0f} tokens per CPU second)")
    print(f"plain path (masked-only logits, no fast paths): "
          f"{rate['mlm_lib plain path'] / rate['transformers']:.2f}x transformers")
    print(f"speedup: {rate['mlm_lib'] / rate['transformers']:.2f}")


if __name__ == "__main__":
    main()

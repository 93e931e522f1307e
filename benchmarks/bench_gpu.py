"""Training throughput and model FLOPs utilisation (MFU) of BERT-base shapes on one device.

    python benchmarks/bench_gpu.py                   # BERT-base, seq 128, bf16, 300 steps, CUDA
    python benchmarks/bench_gpu.py --compile         # the same through torch.compile
    python benchmarks/bench_gpu.py --tiny            # a tiny config on CPU (a smoke test)

Random token ids (throughput does not depend on the text), 15% of positions in M and projected
onto the vocabulary (masked-only head), NSP on, AdamW (fused on CUDA). MFU = achieved model FLOPs
per second / the device's dense bf16 peak, counting 6 FLOPs per parameter per token for the
matrix multiplies plus attention's QK^T and AV (the PaLM paper's accounting). Last line:
``mfu: X.XX`` (``n/a`` when the peak is unknown; pass ``--peak-tflops``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from mlm_lib.config import BertConfig  # noqa: E402
from mlm_lib.device import autocast, make_grad_scaler  # noqa: E402
from mlm_lib.model import BertForPreTraining  # noqa: E402
from mlm_lib.optim import build_optimizer  # noqa: E402

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) from the vendors' data sheets.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0,
               "A10G": 70.0, "A10": 125.0, "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0,
               "T4": 65.0}


def peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_TFLOPS.items():
        if key in name:
            return value
    return None


def flops_per_token(cfg: BertConfig, seq: int, mask_rate: float) -> float:
    """Training FLOPs per token: 3 x (forward matmuls), forward = 2 x weights touched."""
    H, L, I, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.vocab_size
    layer = 4 * H * H + 2 * H * I  # QKV + output projection + feed-forward
    attention = 2 * seq * H  # QK^T and AV, per token per layer
    head = mask_rate * (H * H + H * V)  # transform + vocabulary projection, masked tokens only
    return 3 * 2 * (L * (layer + attention) + head)


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny model on CPU, a few steps")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (allocator, kernels)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--device", default=None)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--peak-tflops", type=float, default=None)
    a = p.parse_args(argv)

    if a.tiny:
        cfg = BertConfig.preset("micro", vocab_size=1000, max_position_embeddings=32)
        a.seq, a.batch, a.steps, a.warmup = 32, 4, min(a.steps, 5), min(a.warmup, 1)
        device = torch.device(a.device or "cpu")
        torch.set_num_threads(min(2, torch.get_num_threads()))
    else:
        cfg = BertConfig.preset("base", max_position_embeddings=max(512, a.seq))
        device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    model = BertForPreTraining(cfg, seed=0).to(device)
    net = torch.compile(model) if a.compile else model
    opt = build_optimizer(model, 1e-4)
    if device.type == "cuda":
        opt = torch.optim.AdamW(opt.param_groups, lr=1e-4, fused=True)
    scaler = make_grad_scaler(device)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (a.batch, a.seq), generator=g).to(device)
    masked = (torch.rand(a.batch, a.seq, generator=g) < 0.15).to(device)
    is_next = torch.randint(0, 2, (a.batch,), generator=g).to(device)
    types = torch.zeros_like(ids)
    types[:, a.seq // 2:] = 1

    def step() -> torch.Tensor:
        with autocast(device):
            out = net(ids, token_type_ids=types, masked_positions=masked)
            loss = (torch.nn.functional.cross_entropy(out.mlm_logits.float(), ids[masked])
                    + torch.nn.functional.cross_entropy(out.nsp_logits.float(), 1 - is_next))
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    dt = time.perf_counter() - t0
    if not torch.isfinite(loss):
        raise RuntimeError(f"loss became {float(loss)} during the benchmark")
    tokens_per_s = a.batch * a.seq * a.steps / dt
    achieved = tokens_per_s * flops_per_token(cfg, a.seq, 0.15)
    peak = a.peak_tflops or peak_tflops(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {name}; model: L={cfg.num_hidden_layers} H={cfg.hidden_size} "
          f"A={cfg.num_attention_heads} V={cfg.vocab_size}; batch {a.batch} x {a.seq}; "
          f"precision: {'bf16/fp16 autocast' if device.type == 'cuda' else 'fp32'}; "
          f"compile: {a.compile}")
    print(f"steps: {a.steps} in {dt:.2f} s; final loss {float(loss):.3f}")
    print(f"tokens_per_s: {tokens_per_s:.0f}")
    print(f"achieved TFLOP/s: {achieved / 1e12:.3f}" + (f" of {peak:.0f} peak" if peak else ""))
    mfu = achieved / (peak * 1e12) if peak else float("nan")
    print(f"mfu: {mfu:.3f}" if peak else "mfu: n/a (unknown peak; pass --peak-tflops)")
    return {"tokens_per_s": tokens_per_s, "mfu": mfu}


if __name__ == "__main__":
    main()

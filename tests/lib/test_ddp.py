"""Two CPU processes under torchrun (gloo on 127.0.0.1) give the same training as one process with
the same global batch.

Tolerance: after 6 AdamW steps every parameter agrees within 1e-4 (absolute) and the logged
losses within 1e-5 (relative). The only difference is the order of float32 additions (each rank
sums half the batch, then gloo adds the halves), which is ~1e-7 per step; Adam's division by
sqrt(v) can magnify it a little on parameters with tiny gradients, hence the margin.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json, sys
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from test_ddp import CFG, make_data
    from mlm_lib.device import init_distributed
    from mlm_lib.init import build_model
    from mlm_lib.train import TrainConfig, train
    from safetensors.torch import save_file
    import torch.distributed as dist

    info = init_distributed(torch.device("cpu"))
    tok, examples = make_data()
    cfg = TrainConfig(**CFG)
    res = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples, cfg, dist_info=info)
    if info.is_main:
        save_file({{k: v.contiguous() for k, v in res.model.state_dict().items()}}, sys.argv[1])
        with open(sys.argv[2], "w") as f:
            json.dump(res.history.columns("mlm_loss", "nsp_loss", kind="train"), f)
    dist.destroy_process_group()
''')

CFG = dict(preset="tiny", model={"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
                                 "num_hidden_layers": 2, "hidden_dropout_prob": 0.0,
                                 "attention_probs_dropout_prob": 0.0},
           max_seq_length=32, batch_size=8, grad_accum=2, lr=3e-3, warmup_steps=2, max_steps=6,
           log_every=1, progress=False, device="cpu", seed=0, corruption={"select": 0.3})


def make_data():
    from mlm_lib.corpus import documents_from_text
    from mlm_lib.pretraining import create_pretraining_examples
    from mlm_lib.packaged import default_tokenizer

    text = "\n\n".join(
        " ".join(f"the {a} of the {b} met the {c} in {1000 + 7 * i + j}." for j in range(6))
        for i, (a, b, c) in enumerate([("king", "north", "army"), ("queen", "south", "church"),
                                       ("mayor", "city", "council"), ("abbot", "valley", "monks")] * 3))
    tok = default_tokenizer()
    docs = documents_from_text(text)
    return tok, create_pretraining_examples(docs, tok, max_seq_length=32, short_seq_prob=0.0, seed=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_match_one_process(tmp_path):
    from mlm_lib.init import build_model
    from mlm_lib.train import TrainConfig, train

    script = tmp_path / "ddp_worker.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent)))
    weights, hist = tmp_path / "ddp.safetensors", tmp_path / "ddp.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
           str(script), str(weights), str(hist)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]

    torch.set_num_threads(1)
    tok, examples = make_data()
    cfg = TrainConfig(**CFG)
    single = train(build_model(**cfg.model_options(tok.vocab_size)), tok, examples, cfg)
    ddp = load_file(str(weights))
    worst = max((single.model.state_dict()[k] - v).abs().max().item() for k, v in ddp.items())
    assert worst < 1e-4, f"largest parameter difference {worst:.2e}"
    cols = json.loads(hist.read_text())
    ref = single.history.columns("mlm_loss", "nsp_loss", kind="train")
    assert len(cols["mlm_loss"]) == 6
    assert cols["mlm_loss"] == pytest.approx(ref["mlm_loss"], rel=1e-5)
    assert cols["nsp_loss"] == pytest.approx(ref["nsp_loss"], rel=1e-5)
    print(f"2-process DDP vs 1 process: max |parameter difference| = {worst:.2e} after 6 steps")

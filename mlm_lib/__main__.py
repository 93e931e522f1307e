"""Command line: ``python -m mlm_lib {train, fill-mask, eval, export-hf}``.

Examples::

    python -m mlm_lib fill-mask "The [MASK] was steep."
    python -m mlm_lib train --preset mini --out runs/mini --time-budget 600
    python -m mlm_lib train --config my.json --corpus notes.txt --vocab my-vocab.txt --out runs/notes
    python -m mlm_lib train --config mlm_lib/assets/recipes/book-32.json --out runs/book-32
    python -m mlm_lib eval --model runs/mini/step-00001000
    python -m mlm_lib export-hf book-model-hf   # then: pipeline("fill-mask", model="book-model-hf")
    torchrun --nproc_per_node 2 -m mlm_lib train --preset tiny --out runs/ddp
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mlm_lib.baselines import fit_baselines
from mlm_lib.batches import masked_batches
from mlm_lib.checkpoint import MANIFEST, latest_checkpoint, load_checkpoint, save_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.device import init_distributed, resolve_device
from mlm_lib.hf import load_hf_bert, load_hf_tokenizer, save_hf_bert
from mlm_lib.inference import fill_mask, load_model
from mlm_lib.init import build_model
from mlm_lib.masking import BERT_CORRUPTION, Corruption
from mlm_lib.model import BertForPreTraining
from mlm_lib.packaged import RECIPES, default_model_dir, default_vocab, recipe
from mlm_lib.pretraining import prepare_data
from mlm_lib.tokenizer import WordPieceTokenizer, checkpoint_tokenizer
from mlm_lib.train import TrainConfig, default_log, evaluate_mlm, train

# The training flags that set one field: flag, type, the TrainConfig field, help.
TRAIN_OPTIONS = [
    ("--max-steps", int, "max_steps", "optimizer steps (the schedule decays to 0 there)"),
    ("--time-budget", float, "time_budget_s", "stop after this many training seconds"),
    ("--batch-size", int, "batch_size", "global batch, in sequences per optimizer step"),
    ("--grad-accum", int, "grad_accum", "micro-batches per step (same result, less memory)"),
    ("--lr", float, "lr", "peak learning rate"),
    ("--warmup-steps", int, "warmup_steps", "steps of linear warm-up"),
    ("--weight-decay", float, "weight_decay", "AdamW weight decay of the weight matrices"),
    ("--seq-len", int, "max_seq_length", "max tokens per sequence, [CLS] and [SEP] included"),
    ("--eval-every", int, "eval_every", "evaluate every N steps (default: at the end)"),
    ("--save-every", int, "save_every", "save a checkpoint every N steps (default: at the end)"),
    ("--log-every", int, "log_every", "a log line every N steps"),
    ("--seed", int, "seed", "seed of the weights, data order, masks and dropout"),
    ("--device", str, "device", "auto (default), cpu, cuda, cuda:1, mps"),
    ("--threads", int, "threads", "CPU threads for torch"),
    ("--init-from", str, "init_from", "start from this checkpoint's weights (a shorter position "
                                      "table is extended)"),
]
DEFAULT_EVAL_SEQ_LEN = 128  # `eval` of a checkpoint that does not say how it was trained
# The same for the model's size: flag, BertConfig field, help.
MODEL_OPTIONS = [
    ("--layers", "num_hidden_layers", "number of layers L"),
    ("--hidden", "hidden_size", "hidden size H (feed-forward 4H)"),
    ("--heads", "num_attention_heads", "attention heads A"),
]
# What a numeric flag's value must be: (wording, test). The CLI checks them before anything is
# built, so that the error names the flag as typed (the library's own checks name its parameters).
Bound = tuple[str, Callable[[float], bool]]
POSITIVE: Bound = ("positive", lambda v: v > 0)
NOT_NEGATIVE: Bound = (">= 0", lambda v: v >= 0)
RATE: Bound = ("in (0, 1]", lambda v: 0 < v <= 1)
DROPOUT: Bound = ("in [0, 1)", lambda v: 0 <= v < 1)
MIN_SEQ_LEN = 8  # TrainConfig's floor: [CLS], [SEP]s and a few pieces
SEQ_LEN: Bound = (f"at least {MIN_SEQ_LEN}", lambda v: v >= MIN_SEQ_LEN)
# flag, its dest (train and eval name --seq-len's differently), bound
FLAG_BOUNDS: list[tuple[str, str, Bound]] = [
    ("--max-steps", "max_steps", POSITIVE), ("--time-budget", "time_budget_s", POSITIVE),
    ("--batch-size", "batch_size", POSITIVE), ("--grad-accum", "grad_accum", POSITIVE),
    ("--lr", "lr", POSITIVE), ("--warmup-steps", "warmup_steps", NOT_NEGATIVE),
    ("--weight-decay", "weight_decay", NOT_NEGATIVE), ("--eval-every", "eval_every", NOT_NEGATIVE),
    ("--save-every", "save_every", NOT_NEGATIVE), ("--log-every", "log_every", POSITIVE),
    ("--threads", "threads", POSITIVE), ("--layers", "num_hidden_layers", POSITIVE),
    ("--hidden", "hidden_size", POSITIVE), ("--heads", "num_attention_heads", POSITIVE),
    ("--seq-len", "max_seq_length", SEQ_LEN), ("--seq-len", "seq_len", SEQ_LEN),
    ("--mask-rate", "mask_rate", RATE), ("--rate", "rate", RATE), ("--dropout", "dropout", DROPOUT),
    ("--top-k", "top_k", POSITIVE), ("--max-examples", "max_examples", POSITIVE),
]
# The embedded corpora live inside gensim's wheel; "wikipedia+lee" joins them.
GENSIM_CORPORA = ("wikipedia", "lee")
CORPUS_JOIN = "+"
INSTALL_GENSIM = 'pip install gensim (or the extra: pip install "mlm_lib[corpus]")'
EXIT_USAGE = 2  # as argparse exits on a bad command line
MODEL_HELP = ("checkpoint folder, a training run's folder (--out of train): its newest "
              "checkpoint, or a Hugging Face BERT folder with an MLM head (config.json, weights, "
              "vocab.txt) (default: the shipped model)")
HF_CONFIG = "config.json"  # what marks a Hugging Face model folder


class UsageError(Exception):
    """A mistake in the command (a flag's value, a path, a missing package) that one line
    explains: :func:`main` prints it without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mlm_lib",
        description="Train and query small BERT models (masked language modelling).",
        epilog="Run `python -m mlm_lib COMMAND --help` for the options of one command.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train_command(sub)
    add_query_commands(sub)
    return p


def add_train_command(sub: Any) -> None:
    t = sub.add_parser("train", help="pretrain a BERT from scratch (MLM, optionally NSP)",
                       description="Pretrain a BERT on a corpus. Options come from --preset, then "
                                   "--config (a JSON file of training options), then the flags.")
    t.add_argument("--out", required=True, help="folder for checkpoints (step-XXXXXXXX/)")
    t.add_argument("--preset", default="mini",
                   help="model size: " + ", ".join(f"{name} ({size[0]}x{size[1]})" for name, size
                                                   in BertConfig.PRESETS.items())
                        + ", or " + " then ".join(f"'{name}'" for name in RECIPES)
                        + " for the two stages of the shipped model (their recipes, "
                          "mlm_lib/assets/recipes/NAME.json; default: mini)")
    t.add_argument("--config", type=Path, help="JSON file with training options (see TrainConfig)")
    t.add_argument("--vocab", type=Path,
                   help="the WordPiece vocab.txt to train with, read lowercasing as the shipped "
                        "one (default: the shipped model's 8,000-piece vocabulary)")
    t.add_argument("--corpus", nargs="+", default=["wikipedia"],
                   help="'wikipedia' (the embedded excerpt), 'lee', or text files (default: wikipedia)")
    t.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in --out (an error if it has none)")
    t.add_argument("--export", type=Path,
                   help="also write a small fp16 weights-only copy with vocab.txt here (for inference)")
    for flag, kind, name, text in TRAIN_OPTIONS:
        t.add_argument(flag, type=kind, dest=name, help=text)
    for flag, name, text in MODEL_OPTIONS:
        t.add_argument(flag, type=int, dest=name, help=text)
    t.add_argument("--mask-rate", type=float, help="share of tokens in M during training (0.15)")
    t.add_argument("--no-nsp", action="store_true", help="MLM only: single-segment sequences")
    t.add_argument("--dropout", type=float, help="dropout for hidden states and attention")
    t.add_argument("--compile", action="store_true", help="torch.compile the model (GPU runs)")
    t.add_argument("--no-amp", action="store_true", help="fp32 even on CUDA")
    t.add_argument("--quiet", action="store_true", help="no progress bar or log lines")


def add_query_commands(sub: Any) -> None:
    f = sub.add_parser("fill-mask", help="top-k fillers for each [MASK] in a sentence",
                       description='Example: python -m mlm_lib fill-mask "The [MASK] was steep."')
    f.add_argument("text", help="a sentence with one or more [MASK]")
    f.add_argument("--model", type=Path, help=MODEL_HELP)
    f.add_argument("--top-k", type=int, default=5)
    f.add_argument("--pieces", action="store_true",
                   help="allow ##word-pieces as answers (default: whole words only)")

    e = sub.add_parser("eval", help="held-out masked-token accuracy beside count baselines",
                       description="Mask --rate of the held-out split's tokens (all as [MASK]) and "
                                   "compare the model with unigram / bigram / both-neighbour counts.")
    e.add_argument("--model", type=Path, help=MODEL_HELP)
    e.add_argument("--corpus", nargs="+", default=["wikipedia"])
    e.add_argument("--rate", type=float, default=0.15, help="masking rate at evaluation (0.15)")
    e.add_argument("--seq-len", type=int, default=None,
                   help="sequence length (default: the checkpoint's training recipe, else 128)")
    e.add_argument("--nsp", action=argparse.BooleanOptionalAction, default=None,
                   help="sentence pairs (--nsp) or single segments (--no-nsp); default: the "
                        "checkpoint's training recipe, else pairs")
    e.add_argument("--max-examples", type=int, default=None)
    e.add_argument("--threads", type=int, default=None)

    x = sub.add_parser("export-hf", help="write a checkpoint as a Hugging Face BERT folder",
                       description="config.json, model.safetensors (float32), vocab.txt and "
                                   "tokenizer_config.json: what transformers' from_pretrained and "
                                   "pipeline read, with no mlm_lib call.")
    x.add_argument("out", type=Path, help="the folder to write (new, or empty)")
    x.add_argument("--model", type=Path, help=MODEL_HELP)


def train_config_from_args(a: argparse.Namespace) -> TrainConfig:
    """Preset, then --config JSON, then flags: later wins."""
    values: dict[str, Any] = recipe(a.preset) if a.preset in RECIPES else {"preset": a.preset}
    values["model"] = dict(values.get("model", {}))
    if a.config:
        try:
            loaded = json.loads(a.config.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"cannot read the config file {a.config}: {err}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{a.config} must hold a JSON object of training options")
        values["model"].update(loaded.pop("model", {}))
        values.update(loaded)
    for _, _, name, _ in TRAIN_OPTIONS:
        if getattr(a, name) is not None:
            values[name] = getattr(a, name)
    for _, name, _ in MODEL_OPTIONS:
        if getattr(a, name) is not None:
            values["model"][name] = getattr(a, name)
    if a.hidden_size is not None:
        values["model"]["intermediate_size"] = 4 * a.hidden_size
    if a.dropout is not None:
        values["model"].update(hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout)
    if a.mask_rate is not None:
        current = values.get("corruption", BERT_CORRUPTION)
        current = Corruption(**current) if isinstance(current, dict) else current
        values["corruption"] = dataclasses.replace(current, select=a.mask_rate)
    if a.no_nsp:
        values["nsp"] = False
    if a.compile:
        values["compile"] = True
    if a.no_amp:
        values["amp"] = False
    if a.quiet:
        values["progress"] = False
    return TrainConfig.from_dict(values)


def _corpus_arg(items: list[str]) -> str | list[str]:
    return items[0] if len(items) == 1 and not Path(items[0]).exists() else items


# ---------------------------------------------------------------- checks of the user's input

def check_flag_values(a: argparse.Namespace) -> None:
    """Every numeric flag given within its bounds (see FLAG_BOUNDS)."""
    for flag, dest, (wording, ok) in FLAG_BOUNDS:
        value = getattr(a, dest, None)
        if value is not None and not ok(value):
            raise UsageError(f"{flag} must be {wording}, got {value}")


def check_preset(name: str) -> None:
    """``--preset`` is a model size or a shipped recipe (BertConfig alone knows only the sizes)."""
    accepted = [*BertConfig.PRESETS, *RECIPES]
    if name not in accepted:
        raise UsageError(f"--preset {name!r} is unknown; use one of {', '.join(accepted)}")


def check_corpus(items: list[str]) -> None:
    """The embedded corpora need gensim: say how to install it before anything is loaded."""
    corpus = _corpus_arg(items)
    if not isinstance(corpus, str) or importlib.util.find_spec("gensim") is not None:
        return
    needing = [n for n in corpus.split(CORPUS_JOIN) if n in GENSIM_CORPORA]
    if needing:
        raise UsageError(f"--corpus {needing[0]} needs gensim, which is not installed: "
                         f"{INSTALL_GENSIM}; or give --corpus your own .txt files")


def check_file(path: Path, flag: str) -> None:
    """A path the user gave that must be a file to read."""
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give the file itself")


def check_folder_to_write(path: Path, flag: str) -> None:
    """A folder to write into may not exist yet, but must not be a file (else the save at the
    end of a run fails, after all the training)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a folder (it is created if missing)")


def checkpoint_folder(path: Path, flag: str) -> Path:
    """The checkpoint a path means: a checkpoint folder itself, or a training run's folder (what
    ``train --out`` wrote), whose newest step-XXXXXXXX/ is the one ``--resume`` would continue.
    The second is said on stderr, so that the reader knows which weights answered."""
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such folder; give a checkpoint folder or a training "
                         "run's --out folder")
    if not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give the checkpoint folder that holds it")
    if (path / MANIFEST).exists() or (path / HF_CONFIG).exists():
        return path
    newest = latest_checkpoint(path)
    if newest is None:
        raise UsageError(f"{flag} {path} holds no checkpoint (no {MANIFEST}, no {HF_CONFIG}, no "
                         "step-XXXXXXXX/ folder); give a checkpoint folder, a training run's --out "
                         "folder or a Hugging Face BERT folder")
    print(f"using {newest}, the newest checkpoint of {path}", file=sys.stderr)
    return newest


def check_resume(out: Path) -> None:
    """``--resume`` with nothing to resume would silently start afresh: refuse instead."""
    if latest_checkpoint(out) is None:
        raise UsageError(f"--resume: no checkpoint (step-XXXXXXXX/) in {out} to resume; drop "
                         "--resume to start a fresh run there")


def device_missing(device: torch.device) -> bool:
    """Whether this machine lacks ``device`` (torch would fail only once the model moves)."""
    if device.type == "cuda":
        return not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)  # as mlm_lib.device.pick_device asks
        return mps is None or not mps.is_available()
    return False


def check_device(name: str) -> None:
    """``--device`` names a device torch knows and this machine has."""
    if name == "auto":
        return
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"--device {name!r} is not a device; use auto, cpu, cuda, cuda:N or "
                         "mps") from None
    if device_missing(device):
        raise UsageError(f"--device {name}: this machine has no such device; use --device auto "
                         "or cpu")


def check_train_args(a: argparse.Namespace) -> None:
    """What can be checked of ``train``'s command line before anything is built or loaded."""
    check_preset(a.preset)
    if a.config:
        check_file(a.config, "--config")
    check_folder_to_write(Path(a.out), "--out")
    if a.export:
        check_folder_to_write(a.export, "--export")
    if a.vocab:
        check_file(a.vocab, "--vocab")
    if a.resume:
        check_resume(Path(a.out))
    check_corpus(a.corpus)


def checked_config(cfg: TrainConfig, a: argparse.Namespace) -> TrainConfig:
    """The options that --config or a recipe may also set: a device this machine has, and a
    checkpoint to start from (a run's folder means its newest checkpoint)."""
    check_device(cfg.device)
    if cfg.init_from is None:
        return cfg
    flag = "--init-from" if a.init_from else "init_from (of --preset or --config)"
    start = checkpoint_folder(Path(cfg.init_from), flag)
    return dataclasses.replace(cfg, init_from=str(start)) if start != Path(cfg.init_from) else cfg


def read_vocab(path: Path | None) -> WordPieceTokenizer:
    """The training vocabulary; a file that is not one is named by its flag."""
    if path is None:
        return WordPieceTokenizer.from_vocab_file(default_vocab(), do_lower_case=True)
    try:
        return WordPieceTokenizer.from_vocab_file(path, do_lower_case=True)
    except ValueError as err:
        raise UsageError(f"--vocab {path}: {err}") from None


# ---------------------------------------------------------------- the commands

def cmd_train(a: argparse.Namespace) -> int:
    check_train_args(a)
    cfg = checked_config(train_config_from_args(a), a)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    dist_info = init_distributed(resolve_device(cfg.device))
    tokenizer = read_vocab(a.vocab)
    data = prepare_data(_corpus_arg(a.corpus), tokenizer, **cfg.data_options())
    baselines = fit_baselines(data) if dist_info.is_main else None
    model = build_model(**cfg.model_options(data.tokenizer.vocab_size))
    out = Path(a.out)
    if dist_info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        data.tokenizer.save_vocab(out / "vocab.txt")
    result = train(model, data.tokenizer, data.train_examples, cfg, data.valid_examples, out,
                   resume=a.resume, baselines=baselines, dist_info=dist_info,
                   on_log=None if a.quiet else default_log)
    if dist_info.is_main:
        if result.eval:
            r = result.eval
            print(f"held-out: mlm_acc {r['mlm_acc']:.4f} (unigram {r.get('unigram_acc', 0):.4f}, "
                  f"left-bigram {r.get('left_bigram_acc', 0):.4f}, both-neighbours "
                  f"{r.get('both_neighbours_acc', 0):.4f}), nsp_acc {r['nsp_acc']:.4f}")
        print(f"checkpoint: {result.checkpoint}")
        if a.export:
            vocab = data.tokenizer.vocab_text().encode("utf-8")
            extra = {"train_config": cfg.to_dict(), "eval": result.eval or {},
                     "history": result.history.records}
            if cfg.init_from:  # keep the curve of the run it continued (e.g. the short stage)
                earlier = load_checkpoint(cfg.init_from, weights_only=True).extra
                extra["earlier_history"] = earlier.get("history", [])
            path = save_checkpoint(a.export, result.model, result.model.config.to_dict(), result.step,
                                   dtype=torch.float16, files={"vocab.txt": vocab}, extra=extra)
            size = sum(p.stat().st_size for p in path.iterdir()) / 1e6
            print(f"exported fp16 weights to {path} ({size:.1f} MB)")
    if dist_info.enabled:
        dist.destroy_process_group()
    return 0


def model_folder(a: argparse.Namespace) -> Path:
    """The checkpoint ``--model`` means (see :func:`checkpoint_folder`); the shipped one without it."""
    return default_model_dir() if a.model is None else checkpoint_folder(a.model, "--model")


def _load(model_path: Path) -> tuple[BertForPreTraining, WordPieceTokenizer]:
    if (model_path / MANIFEST).exists():
        model, tok = load_model(model_path), checkpoint_tokenizer(model_path)
    else:  # a Hugging Face folder, read as mlm_lib.hf reads it
        model, tok = load_hf_bert(model_path).eval(), load_hf_tokenizer(model_path)
        if not isinstance(model, BertForPreTraining):
            raise UsageError(f"--model {model_path}: this Hugging Face folder holds an encoder without "
                             "an MLM head (BertModel weights), so it cannot fill a blank")
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(f"the tokenizer has {tok.vocab_size} pieces but the model expects "
                         f"{model.config.vocab_size}; put the training vocab.txt in {model_path}")
    return model, tok


def cmd_fill_mask(a: argparse.Namespace) -> int:
    model, tok = _load(model_folder(a))
    text = a.text.replace("[mask]", "[MASK]")
    for i, pred in enumerate(fill_mask(model, tok, text, top_k=a.top_k, whole_words=not a.pieces)):
        print(f"[MASK] #{i + 1}: " + "  ".join(f"{t} ({p:.3f})" for t, p in zip(pred.tokens, pred.probs)))
    return 0


def cmd_export_hf(a: argparse.Namespace) -> int:
    out = a.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder; name a new one")
    source = model_folder(a)
    model, tok = _load(source)
    # written beside the target and renamed into place: an interrupted export leaves no half folder
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        raise UsageError(f"{partial} is in the way (an interrupted export?); remove it")
    save_hf_bert(model, partial, tokenizer=tok)
    if out.exists():
        out.rmdir()
    partial.rename(out)
    print(f"wrote {out} from {source}; transformers reads it: "
          f"pipeline(\"fill-mask\", model=\"{out}\")")
    return 0


def eval_recipe(a: argparse.Namespace, model_path: Path, model: BertForPreTraining
                ) -> tuple[dict[str, Any], str]:
    """How to cut the held-out text (the arguments of ``prepare_data``): as the checkpoint was
    trained (its stored ``train_config``), unless flags say otherwise, so that a model is scored
    on the kind of input it learned from."""
    stored = (load_checkpoint(model_path, weights_only=True).extra.get("train_config")
              if (model_path / MANIFEST).exists() else None)  # a Hugging Face folder keeps none
    values = {"max_seq_length": DEFAULT_EVAL_SEQ_LEN, "nsp": True}
    source = "defaults"
    if stored:
        values |= {k: stored[k] for k in ("max_seq_length", "short_seq_prob", "nsp", "seed") if k in stored}
        source = "the checkpoint's training recipe"
    for name, flag in (("max_seq_length", a.seq_len), ("nsp", a.nsp)):
        if flag is not None:
            values[name] = flag
            source += f", {name} from the command line"
    values["max_seq_length"] = min(values["max_seq_length"], model.config.max_position_embeddings)
    return values, source


def cmd_eval(a: argparse.Namespace) -> int:
    if a.threads:
        torch.set_num_threads(a.threads)
    check_corpus(a.corpus)
    model_path = model_folder(a)
    model, tok = _load(model_path)
    cut, source = eval_recipe(a, model_path, model)
    nsp = cut["nsp"]
    print(f"held-out text cut as {source}: sequences of up to {cut['max_seq_length']} pieces, "
          f"{'sentence pairs' if nsp else 'single segments'}")
    data = prepare_data(_corpus_arg(a.corpus), tok, **cut)
    corruption = Corruption(select=a.rate, mask=1.0, random=0.0, keep=0.0)
    batches = masked_batches(data.valid_examples, tok, corruption, max_examples=a.max_examples)
    r = evaluate_mlm(model, batches, nsp=nsp, baselines=fit_baselines(data))
    print(f"held-out masked tokens:   {r['num_masked']}")
    for name in ("unigram", "left_bigram", "both_neighbours"):
        print(f"{name + ' baseline:':25s} {r[name + '_acc']:.4f}")
    print(f"{'model accuracy:':25s} {r['mlm_acc']:.4f} (loss {r['mlm_loss']:.3f})")
    if nsp:
        print(f"{'NSP accuracy:':25s} {r['nsp_acc']:.4f}")
    print(f"accuracy_over_unigram: {r['mlm_acc'] / max(r['unigram_acc'], 1e-12):.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"train": cmd_train, "fill-mask": cmd_fill_mask, "eval": cmd_eval,
               "export-hf": cmd_export_hf}[args.command]
    try:
        check_flag_values(args)
        return handler(args)
    except (UsageError, ValueError, FileNotFoundError) as err:  # CheckpointError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())

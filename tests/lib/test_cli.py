"""The command line: help, a tiny train -> export -> fill-mask -> eval round, resume, bad input."""

from __future__ import annotations

import json
import random

import pytest

from mlm_lib.__main__ import build_parser, main, train_config_from_args
from mlm_lib.checkpoint import latest_checkpoint, load_checkpoint


def test_help_explains_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("train", "fill-mask", "eval"):
        assert word in out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--time-budget" in out and "--resume" in out and "--corpus" in out


def test_config_file_then_flags(tmp_path):
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(json.dumps({"lr": 0.005, "batch_size": 16, "model": {"num_hidden_layers": 3}}))
    args = build_parser().parse_args(["train", "--out", str(tmp_path), "--preset", "tiny",
                                      "--config", str(cfg_file), "--batch-size", "8", "--no-nsp"])
    cfg = train_config_from_args(args)
    assert (cfg.preset, cfg.lr, cfg.batch_size, cfg.nsp) == ("tiny", 0.005, 8, False)
    assert cfg.model["num_hidden_layers"] == 3
    book = train_config_from_args(build_parser().parse_args(["train", "--out", "x", "--preset", "book"]))
    from mlm_lib.book.recipes import book_train_config
    assert book == book_train_config()


def test_bad_config_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"learning_rate": 1}))
    assert main(["train", "--out", str(tmp_path / "o"), "--config", str(bad)]) == 2
    assert "unknown training option(s): learning_rate" in capsys.readouterr().err


def test_train_export_fill_mask_eval_resume(tmp_path, capsys):
    rng = random.Random(0)
    words = ["the river", "a road", "the old town", "the castle", "a bridge", "the hill"]
    text = "\n\n".join(" ".join(f"{rng.choice(words).capitalize()} was near {rng.choice(words)}."
                                for _ in range(10)) for _ in range(24))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text)
    out, export = tmp_path / "run", tmp_path / "export"
    common = ["train", "--corpus", str(corpus), "--out", str(out), "--preset", "tiny",
              "--layers", "1", "--hidden", "32", "--heads", "2", "--batch-size", "4",
              "--seq-len", "32", "--threads", "2", "--quiet", "--save-every", "2"]
    assert main(common + ["--max-steps", "4", "--export", str(export)]) == 0
    printed = capsys.readouterr().out
    assert "held-out: mlm_acc" in printed and "exported fp16 weights" in printed
    assert load_checkpoint(latest_checkpoint(out)).step == 4
    assert (export / "vocab.txt").exists()

    assert main(["fill-mask", "The [MASK] was near the [MASK].", "--model", str(export), "--top-k", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[MASK] #1:") and lines[0].count("(") == 3

    assert main(["eval", "--model", str(export), "--corpus", str(corpus), "--seq-len", "32"]) == 0
    printed = capsys.readouterr().out
    assert "unigram baseline" in printed and "accuracy_over_unigram" in printed

    assert main(common + ["--max-steps", "6", "--resume"]) == 0
    ck = load_checkpoint(latest_checkpoint(out))
    assert ck.step == 6
    steps = [r["step"] for r in ck.extra["history"] if r["kind"] == "train"]
    assert steps == [4, 6]  # logged at the end of each run; the history carried over


def test_fill_mask_without_mask_is_an_error(tmp_path, capsys):
    assert main(["fill-mask", "No blank here."]) == 2
    assert "no [MASK]" in capsys.readouterr().err


def test_eval_cuts_the_text_as_the_checkpoint_was_trained(capsys):
    # the book's model was trained on single segments of up to 64 pieces: eval says so and uses it
    assert main(["eval", "--max-examples", "64", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert "the checkpoint's training recipe: sequences of up to 64 pieces, single segments" in out
    assert "NSP accuracy" not in out
    assert main(["eval", "--max-examples", "64", "--threads", "2", "--nsp", "--seq-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "nsp from the command line" in out and "up to 32 pieces, sentence pairs" in out



def test_train_uses_the_given_vocabulary(tmp_path, capsys):
    from mlm_lib.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("The river was near the road. A bridge was on the hill." for _ in range(8)))
    vocab = tmp_path / "vocab.txt"
    WordPieceTokenizer(list(SPECIAL_TOKENS) + "the river was near road . a bridge on hill".split()).save_vocab(vocab)
    out = tmp_path / "run"
    assert main(["train", "--corpus", str(corpus), "--vocab", str(vocab), "--out", str(out),
                 "--preset", "tiny", "--layers", "1", "--hidden", "32", "--heads", "2",
                 "--batch-size", "4", "--seq-len", "16", "--max-steps", "1", "--threads", "1",
                 "--no-nsp", "--quiet"]) == 0
    assert (out / "vocab.txt").read_bytes() == vocab.read_bytes()
    assert load_checkpoint(latest_checkpoint(out)).config["vocab_size"] == 15
    capsys.readouterr()

"""The command line: help, a tiny train -> export -> fill-mask -> eval round, resume, bad input.

A user's mistake gets one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pytest

from mlm_lib.__main__ import EXIT_USAGE, build_parser, main, train_config_from_args
from mlm_lib.checkpoint import latest_checkpoint, load_checkpoint, step_folder
from mlm_lib.packaged import default_model_dir, recipe
from mlm_lib.train import TrainConfig

# The smallest model the CLI trains in a second (see test_train_export_fill_mask_eval_resume).
TINY = ["--preset", "tiny", "--layers", "1", "--hidden", "32", "--heads", "2", "--batch-size", "4",
        "--seq-len", "32", "--threads", "1"]


def test_help_explains_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("train", "fill-mask", "eval", "export-hf"):
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
    # a shipped recipe's preset is that recipe (tests/book/test_book_recipes.py: and the book's config)
    book = train_config_from_args(build_parser().parse_args(["train", "--out", "x", "--preset", "book"]))
    assert book == TrainConfig.from_dict(recipe("book"))


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


def test_fill_mask_and_eval_read_a_hugging_face_folder(tmp_path, capsys):
    """A folder in Hugging Face's layout (config.json, weights, vocab.txt) answers as the
    checkpoint it was written from; an encoder without its MLM head is refused in one line."""
    from mlm_lib.hf import save_hf_bert
    from mlm_lib.inference import load_model
    from mlm_lib.tokenizer import checkpoint_tokenizer

    shipped = default_model_dir()
    model, tok = load_model(shipped), checkpoint_tokenizer(shipped)
    save_hf_bert(model, tmp_path / "hf", tokenizer=tok)
    sentence = "tirana is the capital of [MASK] ."
    assert main(["fill-mask", sentence]) == 0
    from_checkpoint = capsys.readouterr().out
    assert main(["fill-mask", sentence, "--model", str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out == from_checkpoint  # the same weights, the same answer
    assert main(["eval", "--model", str(tmp_path / "hf"), "--max-examples", "32", "--threads", "1"]) == 0
    assert "unigram baseline" in capsys.readouterr().out

    save_hf_bert(model.bert, tmp_path / "encoder", tokenizer=tok)  # the encoder alone
    assert main(["fill-mask", sentence, "--model", str(tmp_path / "encoder")]) == 2
    assert "without an MLM head" in capsys.readouterr().err


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


# ---------------------------------------------------------------- a user's mistakes: one line each

def one_line_error(capsys) -> str:
    """The single stderr line of a refused command (nothing on stdout, no traceback)."""
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def small_corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join("The river was near the road. A bridge was on the hill." for _ in range(8)))
    return path


def test_model_that_is_a_file_is_one_line_from_the_shell(tmp_path):
    # the real entry point: the exit status and stderr as a shell sees them
    a_file = tmp_path / "weights.bin"
    a_file.write_bytes(b"x")
    done = subprocess.run([sys.executable, "-m", "mlm_lib", "fill-mask", "The [MASK].", "--model",
                           str(a_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"error: --model {a_file} is a file; give the "
                                                "checkpoint folder that holds it"]


@pytest.mark.parametrize("command", [["eval"], ["train", "--out", "OUT"]])
def test_missing_gensim_says_what_to_install(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gensim", None)  # `import gensim` fails as if not installed
    argv = [str(tmp_path / "o") if arg == "OUT" else arg for arg in command]
    assert main(argv) == EXIT_USAGE
    line = one_line_error(capsys)
    assert "--corpus wikipedia needs gensim" in line and "pip install gensim" in line


def test_resume_with_nothing_to_resume_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "--resume", "--out", str(empty), "--corpus", str(small_corpus(tmp_path)),
                 *TINY, "--max-steps", "1", "--quiet"]) == EXIT_USAGE
    line = one_line_error(capsys)
    assert f"--resume: no checkpoint (step-XXXXXXXX/) in {empty}" in line and "drop --resume" in line
    assert list(empty.iterdir()) == []  # nothing was started


def test_unknown_preset_lists_every_preset(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path), "--preset", "nope"]) == EXIT_USAGE
    line = one_line_error(capsys)
    for name in ("micro", "tiny", "mini", "small", "base", "large", "book-32", "book"):
        assert f" {name}" in line
    assert line.startswith("error: --preset 'nope' is unknown")


@pytest.mark.parametrize("argv, message", [
    (["train", "--out", "OUT", "--mask-rate", "1.5"], "--mask-rate must be in (0, 1], got 1.5"),
    (["eval", "--rate", "0"], "--rate must be in (0, 1], got 0.0"),
    (["fill-mask", "The [MASK].", "--top-k", "0"], "--top-k must be positive, got 0"),
    (["train", "--out", "OUT", "--batch-size", "0"], "--batch-size must be positive, got 0"),
    (["eval", "--seq-len", "4"], "--seq-len must be at least 8, got 4"),
])
def test_flag_values_are_checked_by_their_flag(argv, message, tmp_path, capsys):
    assert main([str(tmp_path / "o") if arg == "OUT" else arg for arg in argv]) == EXIT_USAGE
    assert one_line_error(capsys) == f"error: {message}"


def test_time_budget_bar_counts_seconds_not_a_fake_step_total(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "run"), "--corpus", str(small_corpus(tmp_path)),
                 *TINY, "--no-nsp", "--time-budget", "1", "--max-steps", str(10**9),
                 "--log-every", str(10**6)]) == 0
    err = capsys.readouterr().err
    assert "/1 s [" in err and "step=" in err
    assert str(10**9) not in err and "/1000000000" not in err


def test_a_run_folder_as_model_means_its_newest_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    for step in (100, 300):  # the shipped model stands in for a run's checkpoints
        shutil.copytree(default_model_dir(), step_folder(run, step))
    newest = step_folder(run, 300)
    assert main(["fill-mask", "The [MASK] was steep.", "--model", str(run), "--top-k", "2"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == f"using {newest}, the newest checkpoint of {run}"
    assert out.startswith("[MASK] #1:")
    assert main(["eval", "--model", str(run), "--corpus", str(small_corpus(tmp_path)),
                 "--max-examples", "8", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert err.strip() == f"using {newest}, the newest checkpoint of {run}"
    assert "accuracy_over_unigram" in out


@pytest.mark.parametrize("argv, message", [
    (["train", "--out", "OUT", "--config", "TMP/missing.json"], "--config TMP/missing.json: no such file"),
    (["train", "--out", "OUT", "--vocab", "TMP/a.txt"], "--vocab TMP/a.txt: vocabulary lacks the special"),
    (["train", "--out", "OUT", "--vocab", "TMP"], "--vocab TMP is a folder"),
    (["train", "--out", "TMP/a.txt"], "--out TMP/a.txt is a file"),
    (["train", "--out", "OUT", "--export", "TMP/a.txt"], "--export TMP/a.txt is a file"),
    (["train", "--out", "OUT", "--corpus", "no-such-corpus", *TINY], "unknown corpus 'no-such-corpus'"),
    (["train", "--out", "OUT", "--device", "nope"], "--device 'nope' is not a device"),
    (["train", "--out", "OUT", "--init-from", "TMP/nowhere"], "--init-from TMP/nowhere: no such folder"),
    (["fill-mask", "The [MASK].", "--model", "TMP/nowhere"], "--model TMP/nowhere: no such folder"),
    (["eval", "--model", "TMP"], "--model TMP holds no checkpoint"),
])
def test_other_mistakes_are_one_line(argv, message, tmp_path, capsys):
    (tmp_path / "a.txt").write_text("not\na\nvocabulary\n")
    fill = {"OUT": str(tmp_path / "o")}
    assert main([fill.get(arg, arg).replace("TMP", str(tmp_path)) for arg in argv]) == EXIT_USAGE
    assert message.replace("TMP", str(tmp_path)) in one_line_error(capsys)


def test_export_hf_writes_a_folder_transformers_fills_blanks_with(tmp_path, capsys):
    """`export-hf` writes the shipped model so that transformers' own pipeline, with no mlm_lib
    call, ranks the same first answer as `fill-mask`; a folder in the way is refused in one line."""
    from transformers import pipeline

    sentence = "tirana is the capital of [MASK] ."
    assert main(["fill-mask", sentence, "--top-k", "1"]) == 0
    ours = capsys.readouterr().out.split(": ", 1)[1].split(" (")[0]
    out = tmp_path / "book-model-hf"
    assert main(["export-hf", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out and not (tmp_path / "book-model-hf.partial").exists()
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "vocab.txt",
                                                "tokenizer_config.json"}
    theirs = pipeline("fill-mask", model=str(out), device="cpu")(sentence)[0]["token_str"]
    assert theirs == ours
    assert main(["export-hf", str(out)]) == EXIT_USAGE  # not empty: nothing overwritten
    assert "not an empty folder" in capsys.readouterr().err

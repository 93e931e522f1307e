"""A few dozen short examples with the library's shipped tokenizer (the book's vocabulary): fast to
train on, and enough to overfit."""

from __future__ import annotations

from mlm_lib.packaged import default_tokenizer
from mlm_lib.pretraining import PreparedData, PretrainingExample

SENTENCES = [
    "the cat sat on the mat and looked at the door",
    "a dog ran across the park to find the ball",
    "the river flows into the sea near the old town",
    "she wrote a letter to her brother in the city",
    "the king of the country lived in a large castle",
    "many people visit the museum during the summer",
]
REPEATS = 8  # each sentence eight times: 48 examples
TRAIN_EXAMPLES = 40  # the rest are held out


def toy_data() -> PreparedData:
    """The sentences, repeated, as single-segment examples: 40 to train on, 8 held out."""
    tok = default_tokenizer()
    examples = []
    for _ in range(REPEATS):
        for s in SENTENCES:
            ids = tok.encode(s).input_ids
            examples.append(PretrainingExample(ids, [0] * len(ids), 1))
    return PreparedData(tok, examples[:TRAIN_EXAMPLES], examples[TRAIN_EXAMPLES:], [])

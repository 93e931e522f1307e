"""mlm_lib: the library behind *Fill in the Blank*, a book on BERT's masked language modelling.

Two rooms. ``mlm_lib`` is the BERT a teacher reuses, one flat module per concern, named as the
book names things:

- ``tokenizer``   WordPiece encoding, identical to BERT's ``BertTokenizer``, and padding a batch
- ``wordpiece``   training a WordPiece vocabulary from text
- ``corpus``      the embedded Wikipedia excerpt, your own text files, train/validation split
- ``pretraining`` ``[CLS] A [SEP] B [SEP]`` examples and NSP pairs, a corpus made ready to train on
- ``masking``     choosing M and the corruption recipe (80/10/10) that makes x_\\M
- ``batches``     collating, data order, and the fixed held-out blanks
- ``model``       BERT: embeddings, attention, encoder, pooler, MLM and NSP heads
- ``loss``        L = -sum_{i in M} log P(x_i | x_\\M), piece by piece
- ``loop``        the one training loop and evaluator, used by every model of the book
- ``optim``       AdamW and the warm-up / decay schedule
- ``init``        how a pretraining run's model starts
- ``train``       pretraining: config, objective, checkpoints, evaluation
- ``device``      device, mixed precision and the processes of a ``torchrun`` run
- ``checkpoint``  atomic, pickle-free checkpoints (``files``: hashes and atomic writes)
- ``inference``   fill-mask, sentence loss, attention and hidden states
- ``hf``          Hugging Face folders in and out
- ``finetune``    a classifier on [CLS] and its training
- ``tasks``       the other heads: a label for every token, a span of segment B
- ``electra``     replaced token detection: a generator's samples, a discriminator at every position
- ``causal``      the next-token model BERT is compared with (GPT's objective and generation)
- ``baselines``   the count models a trained BERT must beat
- ``stats``       95% intervals for comparisons
- ``numerics``    the tolerance for "two computations of one function agree to rounding"
- ``packaged``    what ships in ``mlm_lib/assets``: a small pretrained BERT, its vocabulary, its recipes

``mlm_lib.book`` is the book's machinery, which the library never imports (its command line
included): recall widgets, live charts, figures, experiments and their results, and the names the
chapters give the shipped model, vocabulary and recipes.

Submodules are imported explicitly (``from mlm_lib.loss import mlm_loss``) so that importing the
package stays cheap.
"""

__version__ = "0.2.0"

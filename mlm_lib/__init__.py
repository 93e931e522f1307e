"""mlm_lib: the library behind *Fill in the Blank*, a book on BERT's masked language modelling.

One flat module per concern, named as the book names things:

- ``tokenizer``  WordPiece, identical to BERT's ``BertTokenizer``
- ``corpus``     the embedded Wikipedia excerpt, your own text files, train/validation split
- ``pretraining`` ``[CLS] A [SEP] B [SEP]`` examples and NSP pairs
- ``masking``    choosing M and the 80/10/10 corruption that makes x_\\M
- ``model``      BERT: embeddings, attention, encoder, pooler, MLM and NSP heads
- ``loss``       L = -sum_{i in M} log P(x_i | x_\\M), piece by piece
- ``train``      the pretraining loop, checkpoints, metrics
- ``recall``     the book's self-test widgets

Submodules are imported explicitly (``from mlm_lib.loss import mlm_loss``) so that importing the
package stays cheap.
"""

__version__ = "0.1.0"

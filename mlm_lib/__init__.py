"""mlm_lib: the library behind *Fill in the Blank*, a book on BERT's masked language modelling.

Two rooms. ``mlm_lib`` is the BERT a teacher reuses, one flat module per concern, named as the
book names things; its modules, one line each, are the table of CONTRIBUTING.md, "The library".

``mlm_lib.book`` is the book's machinery, which the library never imports (its command line
included): recall widgets, live charts, figures, experiments and their results, and the names the
chapters give the shipped model, vocabulary and recipes.

Submodules are imported explicitly (``from mlm_lib.loss import mlm_loss``) so that importing the
package stays cheap.
"""

__version__ = "0.2.0"

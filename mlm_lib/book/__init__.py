"""The book's machinery: what the chapters of *Fill in the Blank* use around the BERT library.

``mlm_lib`` itself is the reusable BERT and never imports this package (``tests/lib/test_layout.py``).
Here live the recall widgets, the live formula charts, the figures, the chapters' short training
runs, the multi-seed experiments and their results files, and the book's model and vocabulary.
It needs the ``[book]`` extra.
"""

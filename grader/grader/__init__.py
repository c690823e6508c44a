"""The course kit's grader: build a submission, check it, time it, score it, report it.

One module per verb (``grade``), behind a thin command line (``cli``). Plain Python 3, no
dependencies, so it runs on any GPU machine that has the CUDA toolkit.
"""

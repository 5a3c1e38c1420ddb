"""A run from plan to record: the matrix run, one repro in one cell, the forms and fixes for this machine, the
sandbox, the child runner and its events, the classifier, and the ``bench`` command's figures."""

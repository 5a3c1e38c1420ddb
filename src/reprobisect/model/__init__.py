"""The words of the harness as typed objects: repro, form, fix, cell, outcome, signature, record, and the one rule
that folds repeats into a verdict. Imports nothing but errors."""

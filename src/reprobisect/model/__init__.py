"""The words of the harness as typed objects: repro, form, fix, cell, outcome, signature, record, the one rule
that folds repeats into a verdict, and the store that keeps records and logs on disk. Imports nothing but errors,
and util's atomic write for the store."""

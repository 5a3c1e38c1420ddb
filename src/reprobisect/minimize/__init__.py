"""Minimal reproductions by machine: a script cut down to what still tells the bad release from the good one."""

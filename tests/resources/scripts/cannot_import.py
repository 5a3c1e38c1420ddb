"""Imports a package that no cell has."""

import deepspeed_that_does_not_exist  # noqa: F401

"""Dies of SIGSEGV, as a broken extension would."""

import ctypes

ctypes.string_at(0)

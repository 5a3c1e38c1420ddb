"""Prints a handled traceback (the GAN report's), then dies by SIGSEGV: a CRASH, whatever was printed."""

import os
import signal
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "fakelib"))
from deepspeed.runtime.zero.stage_1_and_2 import reduce_independent_p_g_buckets_and_remove_grads

try:
    reduce_independent_p_g_buckets_and_remove_grads(None)
except TypeError:
    traceback.print_exc()
sys.stdout.flush()
sys.stderr.flush()
os.kill(os.getpid(), signal.SIGSEGV)

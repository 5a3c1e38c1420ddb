"""Sleeps past its timeout in the main thread: the harness's SIGINT should make it print where it was stuck."""

import time

print("sleeping", flush=True)
time.sleep(600)

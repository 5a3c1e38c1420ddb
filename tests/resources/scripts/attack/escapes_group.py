"""A grandchild moves to its own process group (named by argv[1]); the parent then hangs until its timeout."""

import subprocess
import sys
import time

subprocess.Popen([sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(300)", sys.argv[1]])
time.sleep(300)

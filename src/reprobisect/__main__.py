"""``python -m reprobisect``."""

import sys

from reprobisect.commands.main import main

sys.exit(main())

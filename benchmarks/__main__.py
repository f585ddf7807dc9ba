"""``python -m benchmarks [--quick] [--case NAME ...] [--list]``: see :mod:`benchmarks.suite`."""

import sys

from benchmarks.suite import main

sys.exit(main())

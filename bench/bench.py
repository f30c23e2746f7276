"""make bench: the same as `python -m dlx bench` (see python/dlx/bench/)."""
import sys

from dlx.bench import main

sys.exit(main())

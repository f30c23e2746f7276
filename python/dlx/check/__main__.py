"""python -m dlx.check: the checker's command line, and the entry of its child processes
(`python -m dlx.check --child CONFIG`)."""
import sys

from . import main

sys.exit(main())

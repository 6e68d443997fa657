"""`python -m tfdqn` is the `tfdqn` command."""

import sys

from tfdqn.command import main

sys.exit(main())

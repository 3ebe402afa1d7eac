"""``python -m kernel_ext`` and the ``besser-agent`` console script."""

import sys

from kernel_ext.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m citegate_assets.cli`: the same as the `citegate` script."""

import sys

from citegate_assets.cli import main

sys.exit(main())

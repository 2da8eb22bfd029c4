"""``python -m masorch`` runs the CLI."""

import sys

from masorch.cli.main import main

sys.exit(main())

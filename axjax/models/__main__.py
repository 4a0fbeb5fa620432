"""``python -m axjax.models generate FOLDER --prompt TEXT``: see ``axjax.models._cli``."""

import sys

from ._cli import main

sys.exit(main())

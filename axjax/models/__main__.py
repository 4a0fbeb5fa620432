"""``python -m axjax.models generate FOLDER --prompt TEXT``: see ``axjax.models._cli``."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())

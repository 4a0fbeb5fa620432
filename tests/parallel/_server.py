"""The one process of 8 simulated CPU devices that runs every single-process check of
tests/parallel for a pytest worker (tests/parallel/conftest.py starts it once, the first
time a test needs a check, and ends it with the session).

``python tests/parallel/_server.py`` reads requests from stdin, one JSON line each: a list of
checks, each ``[name, *args]``. It runs them in order, printing ``PASS name <seconds>s`` or
``FAIL name`` and the traceback for each, then ``END <token>`` (the request's last item is
``["END", token]``); it exits at the end of stdin. The checks are those of ``_checks.py``
and ``_layer_stack_check.py`` (all on 8 devices: JAX fixes the count when it starts), and
the restore of the two-process checkpoint (``two_process_restore FOLDER``: one process, on
2 of the devices, another mesh than the 8 that saved it).

Each process pays JAX's start-up, the imports (about 4 s of CPU for ``axjax`` alone) and
its own compilations: one process instead of three saves them, and checks that build the
same model share its compiled programs (the layer stack's one-device references).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tests.parallel._checks as c  # noqa: E402  (first: it sets the device count)
import tests.parallel._layer_stack_check as layer_stack  # noqa: E402

#: every check by name; ``two_process_restore`` takes the folder the two processes saved in
CHECKS: dict[str, Callable[..., None]] = {
    **c.CHECKS,
    **layer_stack.CHECKS,
    "two_process_restore": c.two_process_restore,
}


def unknown(name: str) -> Callable[..., None]:
    def fail(*args: object) -> None:
        raise KeyError(f"no check {name!r}; the checks: {', '.join(CHECKS)}")

    return fail


def serve() -> None:
    """Answer the requests on stdin until it ends."""
    for line in sys.stdin:
        for name, *args in json.loads(line):
            if name == "END":
                print("END", *args, flush=True)
            else:
                c.run_check(name, CHECKS.get(name) or unknown(name), *args)


if __name__ == "__main__":
    serve()

"""``python -m tuner.emulate [flags]``: the same server as ``slotune emulate``."""

from __future__ import annotations

import sys

from slotune.collector.errors import SlotuneError
from slotune.tuner.emulate.server import serve


def main() -> int:
    try:
        serve(sys.argv[1:])
    except SlotuneError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m simulator``: run the simulated OpenRouter gateway (see :func:`simulator.server.main`)."""

import sys

from simulator.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

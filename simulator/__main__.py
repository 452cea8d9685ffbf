"""``python -m reverie_canary.simulator``: run the simulated OpenRouter gateway (see :func:`reverie_canary.simulator.server.main`)."""

import sys

from reverie_canary.simulator.server import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

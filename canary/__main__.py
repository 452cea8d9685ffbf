"""``python -m reverie_canary.canary``: the same as the ``canary`` command."""

from reverie_canary.canary.cli import main

main()

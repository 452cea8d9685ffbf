"""``python -m canary``: the same as the ``canary`` command."""

from canary.cli import main

main()

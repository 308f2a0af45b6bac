"""``python -m obsmem.cli`` runs the ``obsmem`` command."""

from obsmem.cli import main

main()

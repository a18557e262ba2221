"""``python -m ptxrag`` runs the CLI."""

from ptxrag.cli import main

main()

"""Where the installed knowledge pack lives, and the error for a file of it that is missing or malformed.

The lowest module of the corpus: documents, cards and citations all import it, and it imports none of them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ptxrag.base.errors import ManualInputError


class CorpusError(ManualInputError, ValueError):
    """A knowledge-pack file is missing or malformed, or a request names something unknown."""


def package_dir() -> Path:
    """The installed ``ptxrag.corpus`` folder (the repository's ``corpus/`` in an editable install)."""
    return Path(str(resources.files("ptxrag.corpus")))

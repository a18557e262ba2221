"""Errors the indexer raises. Each message says what went wrong and what to do; none leaves a partial
index behind (builds write to a staging place first)."""

from __future__ import annotations

from ptxrag.base.errors import ManualInputError


class IndexerError(ManualInputError):
    """Base class: a problem a user can fix (bad input, missing index, wrong model)."""


class ManualFormatError(IndexerError):
    """A manual file or folder could not be read as a PTX ISA manual."""


class ManualNotFoundError(IndexerError):
    """A manual version (or source) was asked for that is not added or not indexed."""


class IndexNotBuiltError(IndexerError):
    """There is no index to search yet."""


class ModelMismatchError(IndexerError):
    """The index was built with another embedding model than the one asked for."""


class ArchitectureNotDocumentedError(IndexerError):
    """No indexed manual documents the requested target architecture."""

"""The knowledge pack: contract documents, PTX template headers and hardware cards.

Three layers of knowledge an agent gets statically or through retrieval (see docs/knowledge-pack.md):

- ``contracts/*.md``: short rules (memory model, layouts, launch), each with the symptom of breaking it and
  the PTX ISA section it comes from; front matter tags the PTX instructions a document concerns.
- ``templates/``: ``ptxrag_sm90.cuh``, tested inline-PTX wrappers, and unit kernels (``templates/unit``).
- ``hardware/*.toml``: hardware cards, every number with its source.

Data and small loaders only: nothing here imports agent or sandbox code.
"""

from __future__ import annotations

from .cards import HardwareCard, Sourced, hardware_card, list_hardware, render_card
from .citations import ManualIndex, unresolved_citations
from .documents import (
    CorpusError,
    KnowledgeDoc,
    Source,
    contracts,
    iter_documents,
    matches_instruction,
    template_header,
)

__all__ = [
    "CorpusError",
    "HardwareCard",
    "KnowledgeDoc",
    "ManualIndex",
    "Source",
    "Sourced",
    "contracts",
    "hardware_card",
    "iter_documents",
    "list_hardware",
    "matches_instruction",
    "render_card",
    "template_header",
    "unresolved_citations",
]

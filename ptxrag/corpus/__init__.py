"""The knowledge pack: contract, pattern and debug-hint documents, PTX template headers and hardware cards.

Layers of knowledge an agent gets statically or through retrieval (see docs/knowledge-pack.md):

- ``contracts/*.md``: short rules (memory model, layouts, launch), each with the symptom of breaking it and
  the PTX ISA section it comes from; front matter tags the PTX instructions a document concerns.
- ``patterns/*.md``: designs built from the instructions (warp-specialised pipelines, persistent schedulers,
  multicast, TMA-store epilogues, FA3 attention), each citing the manual and naming the tested files that
  show it; ``pattern_for`` picks the one for a task's required instructions.
- ``hints/*.md``: debug hints per architecture: what the evaluator reports -> the contract rules to check.
- ``templates/``: ``ptxrag_sm90.cuh``, tested inline-PTX wrappers, and unit kernels (``templates/unit``).
- ``hardware/*.toml``: hardware cards, every number with its source.

Data and small loaders only: nothing here imports agent or sandbox code.
"""

from __future__ import annotations

from .cards import HardwareCard, Sourced, hardware_card, list_hardware, render_card
from .citations import ManualIndex, unresolved_citations
from .documents import (
    CorpusError,
    HintsDoc,
    KnowledgeDoc,
    PatternDoc,
    Source,
    contracts,
    debug_hints,
    iter_documents,
    matches_instruction,
    pattern_for,
    patterns,
    template_header,
)

__all__ = [
    "CorpusError",
    "HardwareCard",
    "HintsDoc",
    "KnowledgeDoc",
    "ManualIndex",
    "PatternDoc",
    "Source",
    "Sourced",
    "contracts",
    "debug_hints",
    "hardware_card",
    "iter_documents",
    "list_hardware",
    "matches_instruction",
    "pattern_for",
    "patterns",
    "render_card",
    "template_header",
    "unresolved_citations",
]

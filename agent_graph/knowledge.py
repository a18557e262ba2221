"""Static knowledge for a condition: hardware card, template header, contract documents, within budget.

The knowledge pack (``ptxrag.corpus``) is the default provider; anything with the same ``documents``
method can stand in (one override point: ``AgentDeps.knowledge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from ptxrag.tasks import TaskSpec

from .conditions import Condition, Layer
from .state import ContextBlock, ShownSection
from .tokens import count_tokens, fit

#: below this many tokens left, a further document is not started
MIN_USEFUL_TOKENS = 64


class KnowledgeUnavailable(RuntimeError):
    """The knowledge a condition needs cannot be loaded (a harness problem, not the model's)."""


@dataclass(frozen=True)
class KnowledgeItem:
    source: str
    doc_id: str
    title: str
    text: str
    url: str = ""
    #: 0: what the task needs (shown first, across layers); 1: the rest of a layer, shown if room is left
    priority: int = 0


class KnowledgeProvider(Protocol):
    def documents(self, layer: Layer, task: TaskSpec) -> list[KnowledgeItem]:
        """The documents of ``layer`` relevant to ``task``, most important first."""
        ...


class CorpusKnowledge:
    """The bundled knowledge pack: hardware card, template header for the task's arch, contracts."""

    def __init__(self, hardware: str = "h200") -> None:
        self.hardware = hardware

    def documents(self, layer: Layer, task: TaskSpec) -> list[KnowledgeItem]:
        try:
            import ptxrag.corpus as corpus
        except ImportError as e:
            raise KnowledgeUnavailable(f"the knowledge pack (ptxrag.corpus) cannot be imported: {e}") from e
        try:
            if layer == "hardware":
                card = corpus.hardware_card(self.hardware)
                title = getattr(card, "title", None) or getattr(card, "name", None) or self.hardware
                return [
                    KnowledgeItem(
                        "hardware", self.hardware, f"Hardware card: {title}", corpus.render_card(card)
                    )
                ]
            if layer == "templates":
                return template_parts(corpus.template_header(arch=task.arch), list(task.required_ptx))
            if layer == "contracts":
                docs = corpus.contracts(instructions=list(task.required_ptx))
                return [
                    KnowledgeItem("contracts", d.doc_id, d.title, d.text, str(d.path or "")) for d in docs
                ]
        except KnowledgeUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the pack is a harness failure: say which layer
            raise KnowledgeUnavailable(
                f"could not load the {layer!r} layer from the knowledge pack: {e}"
            ) from e
        raise KnowledgeUnavailable(f"unknown knowledge layer {layer!r}")


_PART = re.compile(r"^// ===== (.+?) =====$", re.M)


def template_parts(doc: Any, required: list[str]) -> list[KnowledgeItem]:
    """A template header split into its files, most useful first: the umbrella header and ``common``,
    then the families that wrap the task's instructions, then the rest (a tight budget drops the tail
    whole instead of cutting the wrapper the task needs)."""
    marks = list(_PART.finditer(doc.text))
    name = doc.path.name if getattr(doc, "path", None) else doc.doc_id
    if not marks:
        return [
            KnowledgeItem("templates", doc.doc_id, f"{doc.title} ({name})", doc.text, str(doc.path or ""))
        ]
    parts = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(doc.text)
        parts.append((m.group(1), doc.text[m.start() : end]))

    def rank(item: tuple[str, str]) -> int:
        fname, text = item
        if fname == name or fname.endswith("common.cuh"):
            return 0
        if any(p in text for p in required):
            return 1
        if any(p.split(".")[0] + "." in text for p in required):
            return 2
        return 3

    items = []
    for fname, text in sorted(parts, key=rank):  # stable: file order within a rank
        head = f'(include "{name}" to use it; this part is {fname})\n' if fname != name else ""
        items.append(
            KnowledgeItem(
                "templates",
                f"{doc.doc_id}:{fname}",
                f"template header {fname}",
                head + text,
                priority=0 if rank((fname, text)) < 3 else 1,
            )
        )
    return items


def render_item(title: str, text: str) -> str:
    return f"### {title}\n\n{text.strip()}\n"


def build_static_context(
    condition: Condition, task: TaskSpec, provider: KnowledgeProvider
) -> ContextBlock | None:
    """The condition's static layers, in order, cut to ``condition.static_budget_tokens``."""
    if not condition.static:
        return None
    budget = condition.static_budget_tokens
    left = budget
    parts: list[str] = []
    sections: list[ShownSection] = []
    notes: list[str] = []
    items: list[KnowledgeItem] = []
    for layer in condition.static:
        docs = provider.documents(layer, task)
        if not docs:
            notes.append(f"layer {layer!r}: the knowledge pack has nothing for {task.id} ({task.arch})")
        items += docs
    # what the task needs from every layer first, then the rest of each layer (stable: layer order kept)
    for item in sorted(items, key=lambda it: it.priority):
        if left < MIN_USEFUL_TOKENS:
            notes.append(
                f"left out {item.source}:{item.doc_id} ({item.title}): budget of {budget} tokens used up"
            )
            continue
        fitted = fit(render_item(item.title, item.text), left)
        if not fitted.text:
            notes.append(
                f"left out {item.source}:{item.doc_id}: its first line does not fit in {left} tokens"
            )
            continue
        if fitted.truncated:
            notes.append(f"cut {item.source}:{item.doc_id} ({item.title}) to {fitted.tokens} tokens")
        parts.append(fitted.text)
        left -= fitted.tokens + 1  # and the newline that joins the parts
        sections.append(
            ShownSection(
                source=item.source,
                section_number=item.doc_id,
                title=item.title,
                url=item.url,
                tokens=fitted.tokens,
                truncated=fitted.truncated,
            )
        )
    text = "\n".join(parts)
    return ContextBlock(
        kind="static",
        text=text,
        tokens=count_tokens(text),
        budget_tokens=budget,
        sections=sections,
        notes=notes,
    )

"""Static knowledge for a condition: hardware card, template header, contract documents, within budget.

The knowledge pack (``ptxrag.corpus``) is the default provider; anything with the same ``documents``
method can stand in (one override point: ``AgentDeps.knowledge``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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
                doc = corpus.template_header(arch=task.arch)
                include = (
                    f'(on the include path: #include "{doc.path.name}")\n'
                    if getattr(doc, "path", None)
                    else ""
                )
                return [
                    KnowledgeItem("templates", doc.doc_id, doc.title, include + doc.text, str(doc.path or ""))
                ]
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
    for layer in condition.static:
        items = provider.documents(layer, task)
        if not items:
            notes.append(f"layer {layer!r}: the knowledge pack has nothing for {task.id} ({task.arch})")
        for item in items:
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

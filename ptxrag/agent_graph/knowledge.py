"""Static knowledge for a condition: hardware card, template header, contract documents, within budget.

The knowledge pack (``ptxrag.corpus``) is the default provider; anything with the same ``documents``
method can stand in (one override point: ``AgentDeps.knowledge``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from ptxrag.base.errors import KnowledgeFailure
from ptxrag.tasks import TaskSpec

from .conditions import Condition, Layer
from .state import ContextBlock, ShownSection
from .tokens import Fitted, count_tokens, fit

#: below this many tokens left, a further document is not started
MIN_USEFUL_TOKENS = 64


class KnowledgeUnavailable(KnowledgeFailure, RuntimeError):
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
                known = getattr(getattr(corpus, "documents", None), "TEMPLATE_HEADERS", None)
                if known is not None and task.arch not in known:
                    return []  # the pack has no header for this target: an empty layer, noted by the caller
                return template_parts(corpus.template_header(arch=task.arch), list(task.required_ptx))
            if layer == "contracts":
                req = list(task.required_ptx)
                docs = corpus.contracts(instructions=req)
                # the documents that concern most of the task's instructions first
                docs = sorted(docs, key=lambda d: -sum(1 for p in req if d.concerns(p)))
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


def _most_specific_files(parts: list[tuple[str, str]], required: list[str]) -> dict[str, int]:
    """For each required instruction, the files holding its longest dotted prefix (two parts at least,
    unless the name has one): ``cp.async.bulk.tensor.shared::cluster.global`` picks the TMA family, not
    every ``cp.async`` user. Returns file -> how many of the instructions chose it."""
    chosen: dict[str, int] = {}
    for ptx in required:
        comps = ptx.split(".")
        for n in range(len(comps), 0 if len(comps) == 1 else 1, -1):
            prefix = ".".join(comps[:n])
            hits = {f for f, text in parts if re.search(rf"(?<![\w.]){re.escape(prefix)}(?![\w])", text)}
            if hits:
                for f in hits:
                    chosen[f] = chosen.get(f, 0) + 1
                break
    return chosen


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

    relevant = _most_specific_files(parts, required)

    def rank(item: tuple[str, str]) -> tuple[int, int]:
        fname, _ = item
        if fname == name or fname.endswith("common.cuh"):
            return (0, 0)
        return (1, -relevant[fname]) if fname in relevant else (2, 0)

    items = []
    for fname, text in sorted(parts, key=rank):  # stable: file order within a rank
        head = f'(include "{name}" to use it; this part is {fname})\n' if fname != name else ""
        items.append(
            KnowledgeItem(
                "templates",
                f"{doc.doc_id}:{fname}",
                f"template header {fname}",
                head + text,
                priority=0 if rank((fname, text))[0] < 2 else 1,
            )
        )
    return items


def render_item(title: str, text: str) -> str:
    return f"### {title}\n\n{text.strip()}\n"


def _water_fill(needs: dict[str, int], budget: int) -> dict[str, int]:
    """Equal shares of ``budget``; a layer that needs less than its share gives the rest to the others."""
    alloc: dict[str, int] = {}
    left = budget
    pending = sorted(needs, key=lambda k: needs[k])
    while pending:
        share = left // len(pending)
        if needs[pending[0]] <= share:
            k = pending.pop(0)
            alloc[k] = needs[k]
            left -= needs[k]
        else:
            for k in pending:
                alloc[k] = share
            break
    return alloc


def build_static_context(
    condition: Condition, task: TaskSpec, provider: KnowledgeProvider
) -> ContextBlock | None:
    """The condition's static layers within ``condition.static_budget_tokens``.

    Two tiers: first what the task needs from each layer (hardware card, the template families that
    wrap its instructions, the contracts that concern them), the budget shared fairly between layers
    (equal shares; a layer needing less gives the rest to the others); then, if room is left, the rest
    of each layer in order. An item that does not fit whole is cut at a line and marked."""
    if not condition.static:
        return None
    budget = condition.static_budget_tokens
    notes: list[str] = []
    by_layer: dict[str, list[KnowledgeItem]] = {}
    for layer in condition.static:
        docs = provider.documents(layer, task)
        if not docs:
            notes.append(f"layer {layer!r}: the knowledge pack has nothing for {task.id} ({task.arch})")
        by_layer[layer] = docs
    rendered = {id(it): render_item(it.title, it.text) for docs in by_layer.values() for it in docs}
    needs = {
        layer: sum(count_tokens(rendered[id(it)]) + 1 for it in docs if it.priority == 0)
        for layer, docs in by_layer.items()
    }
    alloc = _water_fill(needs, budget)
    chosen: list[tuple[KnowledgeItem, Fitted]] = []
    used = 0
    for name, docs in by_layer.items():
        left = alloc[name]
        for it in (d for d in docs if d.priority == 0):
            got = _place(it, rendered[id(it)], left, budget, notes)
            if got is not None:
                chosen.append((it, got))
                left -= got.tokens + 1
                used += got.tokens + 1
    left = budget - used
    for docs in by_layer.values():
        for it in (d for d in docs if d.priority != 0):
            got = _place(it, rendered[id(it)], left, budget, notes)
            if got is not None:
                chosen.append((it, got))
                left -= got.tokens + 1
    sections = [
        ShownSection(
            source=it.source,
            section_number=it.doc_id,
            title=it.title,
            url=it.url,
            tokens=f.tokens,
            truncated=f.truncated,
        )
        for it, f in chosen
    ]
    text = "\n".join(f.text for _, f in chosen)
    return ContextBlock(
        kind="static",
        text=text,
        tokens=count_tokens(text),
        budget_tokens=budget,
        sections=sections,
        notes=notes,
    )


def _place(item: KnowledgeItem, text: str, left: int, budget: int, notes: list[str]) -> Fitted | None:
    if left < MIN_USEFUL_TOKENS:
        notes.append(f"left out {item.source}:{item.doc_id} ({item.title}): no room left in {budget} tokens")
        return None
    fitted = fit(text, left)
    if not fitted.text:
        notes.append(f"left out {item.source}:{item.doc_id}: its first line does not fit in {left} tokens")
        return None
    if fitted.truncated:
        notes.append(f"cut {item.source}:{item.doc_id} ({item.title}) to {fitted.tokens} tokens")
    return fitted

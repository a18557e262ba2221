"""Static knowledge for a condition: hardware card, template header, contracts, a pattern, debug hints, within
budget.

The knowledge pack (``ptxrag.corpus``) is the default provider; anything with the same ``documents``
method can stand in (one override point: ``AgentDeps.knowledge``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ptxrag.base.errors import KnowledgeFailure
from ptxrag.tasks import TaskSpec

from .conditions import Condition, Layer
from .state import ContextBlock, ShownSection
from .tokens import count_tokens

#: below this many tokens left, a further retrieved section is not started
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
    """The bundled knowledge pack: hardware card, template header for the task's arch, contracts, the one
    pattern for the task's required instructions (``ptxrag.corpus.pattern_for``), debug hints for its arch."""

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
            known = getattr(getattr(corpus, "documents", None), "TEMPLATE_HEADERS", None)
            if layer == "templates":
                if known is not None and task.arch not in known:
                    return []  # the pack has no header for this target: an empty layer, noted by the caller
                return template_parts(corpus.template_header(arch=task.arch), list(task.required_ptx), task)
            if layer == "contracts":
                req = list(task.required_ptx)
                # a contract whose tag is the instruction or a dot-prefix of it concerns the task; one
                # whose tag merely extends it does not (Ampere's `cp.async` is not `cp.async.bulk`)
                docs = [
                    d
                    for d in corpus.contracts(instructions=req)
                    if any(_tag_covers(tag, p) for tag in d.tags for p in req)
                ]
                # the documents that concern most of the task's instructions first
                docs = sorted(docs, key=lambda d: -sum(1 for p in req if d.concerns(p)))
                items = [
                    KnowledgeItem("contracts", d.doc_id, d.title, d.text, str(d.path or "")) for d in docs
                ]
                # the other contracts, shown only to fill (``static_fill``), for the targets the pack covers
                # (those with a template header): the contracts describe that instruction set
                if known is None or task.arch in known:
                    shown = {d.doc_id for d in docs}
                    items += [
                        KnowledgeItem("contracts", d.doc_id, d.title, d.text, str(d.path or ""), priority=1)
                        for d in corpus.contracts()
                        if d.doc_id not in shown
                    ]
                return items
            if layer == "patterns":
                # one document, never more: a condition with this layer shows the task's pattern alone
                p = corpus.pattern_for(list(task.required_ptx), task.family)
                return (
                    [] if p is None else [KnowledgeItem("patterns", p.doc_id, p.title, p.text, str(p.path))]
                )
            if layer == "hints":
                return [
                    KnowledgeItem("hints", d.doc_id, d.title, d.text, str(d.path))
                    for d in corpus.debug_hints(task.arch)
                ]
        except KnowledgeUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the pack is a harness failure: say which layer
            raise KnowledgeUnavailable(
                f"could not load the {layer!r} layer from the knowledge pack: {e}"
            ) from e
        raise KnowledgeUnavailable(f"unknown knowledge layer {layer!r}")


def _tag_covers(tag: str, instruction: str) -> bool:
    t, i = tag.lower(), instruction.lower()
    return i == t or i.startswith(t + ".")


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


_DTYPE_SUFFIX = {
    "bfloat16": "bf16",
    "float16": "f16",
    "half": "f16",
    "float8_e4m3fn": "e4m3",
    "float8_e4m3": "e4m3",
}
_INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def _dtype_variants(task: Any) -> set[str] | None:
    """The ``wgmma_<dtype>`` suffixes the task's operand types call for; None when it names none we know."""
    found = {_DTYPE_SUFFIX[t.dtype] for t in getattr(task, "inputs", []) if t.dtype in _DTYPE_SUFFIX}
    return found or None


def template_parts(doc: Any, required: list[str], task: Any = None) -> list[KnowledgeItem]:
    """A template header split into its files, most useful first: the umbrella header and ``common``,
    then the families that wrap the task's instructions (with the files that include them: ``wgmma.cuh``
    holds the descriptors the ``wgmma_bf16.cuh`` dispatchers need; of the per-dtype files only those of
    the task's operand types), then the rest. Priority 0 marks what the task needs."""
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
    variants = _dtype_variants(task) if task is not None else None
    if variants is not None:
        for fname in list(relevant):
            dt = re.search(r"wgmma_(\w+)\.cuh$", fname)
            if dt and dt.group(1) not in variants:
                del relevant[fname]
    # a family file that includes a chosen file is needed with it (not the umbrella, which includes all)
    for fname, text in parts:
        if fname == name or fname in relevant:
            continue
        included = {Path(inc).name for inc in _INCLUDE.findall(text)}
        hits = [relevant[f] for f in relevant if Path(f).name in included]
        if hits:
            relevant[fname] = max(hits)

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


def build_static_context(
    condition: Condition, task: TaskSpec, provider: KnowledgeProvider
) -> ContextBlock | None:
    """The condition's static layers within ``condition.static_budget_tokens``; nothing is ever cut.

    First, layer by layer in the condition's order, the part of the layer the task's required
    instructions need (the hardware card; the template families that wrap them; the contracts that
    concern them), included whole or not at all; then, with ``condition.static_fill``, further documents
    of the included layers, each whole, while room is left. What was left out, and why, is in the
    block's notes."""
    if not condition.static:
        return None
    budget = condition.static_budget_tokens
    notes: list[str] = []
    by_layer: dict[str, list[KnowledgeItem]] = {}
    for layer in condition.static:
        docs = provider.documents(layer, task)
        if not any(d.priority == 0 for d in docs):
            notes.append(f"layer {layer!r}: the knowledge pack has nothing for {task.id} ({task.arch})")
        by_layer[layer] = docs
    rendered = {id(it): render_item(it.title, it.text) for docs in by_layer.values() for it in docs}
    cost = {key: count_tokens(text) + 1 for key, text in rendered.items()}
    left = budget
    chosen: dict[str, list[KnowledgeItem]] = {layer: [] for layer in by_layer}
    for name, docs in by_layer.items():
        need = [d for d in docs if d.priority == 0]
        tokens = sum(cost[id(d)] for d in need)
        if not need:
            continue
        if tokens <= left:
            chosen[name] = need
            left -= tokens
        else:
            notes.append(
                f"left out layer {name!r} whole: the part {task.id} needs is {tokens} tokens, "
                f"{left} of {budget} left"
            )
            chosen.pop(name)
    for name, docs in by_layer.items():
        if name not in chosen or not condition.static_fill:
            continue
        for d in (d for d in docs if d.priority != 0):
            if cost[id(d)] <= left:
                chosen[name].append(d)
                left -= cost[id(d)]
            else:
                notes.append(f"left out {d.source}:{d.doc_id} ({cost[id(d)]} tokens, {left} left)")
    items = [it for docs in chosen.values() for it in docs]
    sections = [
        ShownSection(
            source=it.source,
            section_number=it.doc_id,
            title=it.title,
            url=it.url,
            tokens=cost[id(it)] - 1,
            needed=it.priority == 0,
        )
        for it in items
    ]
    text = "\n".join(rendered[id(it)] for it in items)
    return ContextBlock(
        kind="static",
        text=text,
        tokens=count_tokens(text),
        budget_tokens=budget,
        sections=sections,
        notes=notes,
    )


def context_fingerprint(cond: Condition, static: ContextBlock | None) -> str:
    """Equal for two conditions that put the same knowledge in front of the model for a task: the same
    static text and the same retrieval settings and budget (names and descriptions aside)."""
    retrieval = cond.retrieval.model_dump_json() if cond.retrieval.enabled else "off"
    blob = "\0".join(
        [
            static.text if static else "",
            retrieval,
            str(cond.retrieval_budget_tokens),
            cond.history.model_dump_json(),
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

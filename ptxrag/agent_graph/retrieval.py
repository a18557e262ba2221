"""The retrieve step: run the round's queries against the manual matching the task's arch, drop what was
shown before, and fill the round's token budget with the best new sections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ptxrag.base.errors import KnowledgeFailure
from ptxrag.tasks import TaskSpec

from .conditions import Condition
from .knowledge import MIN_USEFUL_TOKENS, render_item
from .state import ContextBlock, RetrievalQuery, ShownSection
from .tokens import count_tokens, fit


class RetrievalUnavailable(KnowledgeFailure, RuntimeError):
    """No retriever (or no index) for a condition that needs one; the message says how to get one."""


class DocsRetriever(Protocol):
    """What the agent needs of ``ptxrag.indexer.Retriever``."""

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        version: str | None = None,
        sources: Sequence[str] | None = None,
        exclude_sections: Sequence[str] = (),
    ) -> list[Any]: ...

    def version_for_arch(self, arch: str) -> str: ...


def default_retriever() -> DocsRetriever:
    """The real hybrid retriever over the local index (``ptxrag index`` builds it)."""
    try:
        from ptxrag.indexer import IndexerError, Retriever
    except ImportError as e:
        raise RetrievalUnavailable(f"the retriever (ptxrag.indexer) cannot be imported: {e}") from e
    try:
        return Retriever()
    except IndexerError as e:  # unbuilt index, wrong model, ...: the message already says what to do
        raise RetrievalUnavailable(f"the retriever could not open its index: {e}") from e
    except Exception as e:  # noqa: BLE001 - a broken index: tell the user what to run
        raise RetrievalUnavailable(
            f"the retriever could not open its index ({e}); rebuild it with `ptxrag index`"
        ) from e


def _hit_title(hit: Any) -> str:
    crumb = getattr(hit, "breadcrumb", "") or ""
    return crumb or f"{hit.section_number} {hit.title}".strip()


def _key(source: str, version: str, number: str) -> tuple[str, str, str]:
    # pack documents (contracts, templates, hardware) are not versioned with the manual
    return (source, version if source == "ptx-isa" else "", number)


def retrieve_context(
    condition: Condition,
    task: TaskSpec,
    queries: list[RetrievalQuery],
    retriever: DocsRetriever,
    shown: list[ShownSection],
) -> ContextBlock:
    """New sections for ``queries`` within ``condition.retrieval_budget_tokens``, round-robin over queries
    by rank, so every query contributes its best hit before any contributes its second."""
    settings = condition.retrieval
    budget = condition.retrieval_budget_tokens
    try:
        version = retriever.version_for_arch(task.arch)
    except Exception as e:  # noqa: BLE001
        raise RetrievalUnavailable(f"no manual version for {task.arch}: {e}") from e
    seen = set() if settings.repeat_sections else {_key(*s.key) for s in shown}
    # the retriever drops these (manual section numbers and pack document ids); the key check below
    # guards against a number shared by two sources
    exclude = () if settings.repeat_sections else tuple(dict.fromkeys(s.section_number for s in shown))
    ranked: list[list[Any]] = []
    for q in queries:
        try:
            hits = retriever.search(
                q.text,
                k=settings.k_per_query,
                version=version,
                sources=list(settings.sources),
                exclude_sections=exclude,
            )
        except Exception as e:  # noqa: BLE001 - a broken index is a harness failure
            raise RetrievalUnavailable(f"retrieval failed for query {q.text!r}: {e}") from e
        ranked.append(list(hits))
    left = budget
    parts: list[str] = []
    sections: list[ShownSection] = []
    notes: list[str] = []
    depth = max((len(h) for h in ranked), default=0)
    for rank in range(depth):
        for q, hits in zip(queries, ranked, strict=True):
            if rank >= len(hits) or left < MIN_USEFUL_TOKENS:
                continue
            hit = hits[rank]
            key = _key(hit.source, hit.version, hit.section_number)
            if key in seen:
                continue
            seen.add(key)
            label = f"{hit.source} {hit.version}".strip()
            title = f"[{label}] {_hit_title(hit)}"
            fitted = fit(render_item(title, hit.text), left)
            if not fitted.text:
                continue
            parts.append(fitted.text)
            left -= fitted.tokens + 1
            sections.append(
                ShownSection(
                    source=hit.source,
                    version=hit.version,
                    section_number=hit.section_number,
                    title=hit.title,
                    url=getattr(hit, "url", "") or "",
                    tokens=fitted.tokens,
                    truncated=fitted.truncated,
                    query=q.text,
                    score=getattr(hit, "score", None),
                )
            )
    if not queries:
        notes.append("no queries this round (nothing in the last verdict for the manual to answer)")
    elif not sections:
        notes.append("retrieval found nothing new for this round's queries")
    text = "\n".join(parts)
    return ContextBlock(
        kind="retrieved",
        text=text,
        tokens=count_tokens(text),
        budget_tokens=budget,
        sections=sections,
        notes=notes,
    )

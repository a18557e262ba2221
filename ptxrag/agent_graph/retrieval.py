"""The retrieve step: run the round's queries against the manual matching the task's arch, drop what was
shown before, and fill the round's token budget with the best new sections that are relevant.

Relevance is relative to each query's best section (the retriever's scores are fused ranks, comparable
within one query, not across): a section scoring under ``RELEVANCE_RATIO`` of the best is not shown. From
round 2 on the best may already have been shown; then new sections must still reach that share of the
best's score, so a round whose answer was shown before does not fill its budget with unrelated
sections. The task statement's query names no instruction, so its best section may be unrelated to the
task however it scores (on warp-reduce-redux its hits were ``%nclusterid``, WMMA storage and ``ldmatrix``):
a section it brings is shown only if it names one of the task's required instructions. What is left
unused, and why, is said in the block's notes (the transcript)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ptxrag.base.errors import KnowledgeFailure
from ptxrag.tasks import TaskSpec

from .conditions import Condition
from .knowledge import MIN_USEFUL_TOKENS, render_item
from .queries import STATEMENT_REASON, instruction_roots, mentions_any
from .state import ContextBlock, RetrievalQuery, ShownSection
from .tokens import count_tokens, fit

if TYPE_CHECKING:  # the indexer's typed result; importing it at run time would load the indexer early
    from ptxrag.indexer import Hit

#: a section is shown only if it scores at least this share of its query's best section
RELEVANCE_RATIO = 0.5


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
    ) -> list[Hit]: ...

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


def _hit_title(hit: Hit) -> str:
    crumb = getattr(hit, "breadcrumb", "") or ""
    return crumb or f"{hit.section_number} {hit.title}".strip()


def _score(hit: Hit) -> float | None:
    score = getattr(hit, "score", None)  # a retriever double may leave it out
    return float(score) if isinstance(score, int | float) else None


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
    ranked: list[list[Hit]] = []
    below: list[str] = []
    for q in queries:
        try:
            # the best section overall, shown before or not: the yardstick of relevance for this query
            best = (
                retriever.search(q.text, k=1, version=version, sources=list(settings.sources))
                if exclude
                else []
            )
            hits = retriever.search(
                q.text,
                k=settings.k_per_query,
                version=version,
                sources=list(settings.sources),
                exclude_sections=exclude,
            )
        except Exception as e:  # noqa: BLE001 - a broken index is a harness failure
            raise RetrievalUnavailable(f"retrieval failed for query {q.text!r}: {e}") from e
        hits = list(hits)
        top = _score(best[0]) if best else None
        if hits and (top is None or (_score(hits[0]) or 0) > top):
            top = _score(hits[0])
        if top is not None and top > 0:
            kept = [h for h in hits if (_score(h) or 0) >= RELEVANCE_RATIO * top]
            if len(kept) < len(hits):
                shown_best = (
                    bool(best) and _key(best[0].source, best[0].version, best[0].section_number) in seen
                )
                why = f"its best section ({best[0].section_number}) was shown before; " if shown_best else ""
                below.append(
                    f"query {q.text[:80]!r}: {why}{len(hits) - len(kept)} section(s) scored under "
                    f"{RELEVANCE_RATIO:.0%} of the best and were not shown"
                )
            hits = kept
        if q.reason == STATEMENT_REASON and hits:
            roots = instruction_roots(task)
            on_task = [h for h in hits if mentions_any(h.text, roots)]
            if roots and len(on_task) < len(hits):
                below.append(
                    f"query {q.text[:80]!r} (the task statement): {len(hits) - len(on_task)} section(s) "
                    f"naming none of the task's instructions ({', '.join(roots)}) were not shown"
                )
                hits = on_task
        ranked.append(hits)
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
    notes.extend(below)
    if not queries:
        notes.append("no queries this round (nothing in the last verdict for the manual to answer)")
    elif not sections:
        notes.append("retrieval found nothing new and relevant for this round's queries")
    if below and left >= MIN_USEFUL_TOKENS:
        notes.append(f"{left} of {budget} retrieval tokens left unused: nothing else was relevant enough")
    text = "\n".join(parts)
    return ContextBlock(
        kind="retrieved",
        text=text,
        tokens=count_tokens(text),
        budget_tokens=budget,
        sections=sections,
        notes=notes,
    )

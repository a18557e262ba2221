"""Section fields searched as BM25 indexes of their own, beside the whole text, the title and the summary.

A concept query ("find the lanes of a warp that hold the same value as mine") shares few words with a
long reference section and many with its Description; BM25 over the whole text dilutes them with syntax,
examples and notes (length normalisation). Two fields are built offline from each section's own text:

- ``description``: what the instruction does, its one-line purpose and its whole Description (prose, no
  code or tables); for a section that defines no instruction, its prose paragraphs up to the first label.
- ``queries``: doc2query-style pseudo-queries from the section (``pseudo.py``: purpose and Description
  sentences with the defined names masked, a concept section's first sentences, its short title) put in the
  forms an agent asks ("which instruction ...", "how to ..."); the templates' own words are common to
  every document, so BM25 weighs the section's words.

No model and no hand-written query takes part, so nothing of an evaluation set leaks in."""

from __future__ import annotations

from .chunking import blocks, short_title
from .pseudo import pseudo_queries
from .schema import Section

_LABELS = frozenset(
    ["syntax", "description", "semantics", "notes", "ptx isa notes", "target isa notes", "examples"]
)
#: question forms put around each pseudo-query of an instruction section
TEMPLATES = ("which instruction does {q}", "how to {q}")
#: most characters of a field (a Description runs to a few thousand; a field is what the section is about)
FIELD_CHARS = 4000


def _prose(b: str) -> bool:
    return not b.startswith(("```", "~~~", "|"))


def description(section: Section) -> str:
    """The section's purpose and Description prose (an instruction reference), else its prose before
    the first label."""
    names = {n.lower() for n in section.defines} | {short_title(section.title).lower()}
    out: list[str] = []
    label: str | None = None
    for b in blocks(section.text):
        low = b.strip().rstrip(":").lower()
        if low in _LABELS:
            if label == "description" or not section.defines:
                break  # past the Description (or a concept section's own prose)
            label = low
            continue
        if _prose(b) and low not in names and label in (None, "description"):
            out.append(b)
        if sum(len(x) for x in out) >= FIELD_CHARS:
            break
    return " ".join(out).replace("\n", " ")[:FIELD_CHARS]


def queries(section: Section) -> str:
    """The section's pseudo-queries in question forms, one per line."""
    lines: list[str] = []
    for pq in pseudo_queries([section], all_sentences=True):
        q = pq.query.rstrip(" .")
        if section.defines and pq.kind in ("purpose", "description"):
            q = q.replace("this instruction", "").strip()
            low = q[:1].lower() + q[1:]
            lines += [t.format(q=low) for t in TEMPLATES]
        else:
            lines.append(q)
    return "\n".join(lines)[:FIELD_CHARS]

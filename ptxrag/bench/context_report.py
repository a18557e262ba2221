"""What each condition put in front of the model, in tokens: per knowledge layer, per retrieved section,
and which conditions gave the same prompt for a task. Read from the episodes' ``transcript.jsonl`` (the
rounds' ``layer_tokens``, ``history_tokens``, ``sent_tokens`` and retrieved sections, and the result's
``context_fingerprint``), so it needs nothing beyond a bench folder.

``write_report`` puts these sections at the end of ``report.md`` and ``report.html``; ``ptxrag report`` also
writes them alone as ``context.md``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from .render import Document, Paragraph, Section, Table, to_markdown
from .store import BenchStore
from .study import model_label

CARRIED_TITLE = "Context carried per condition (cl100k_base tokens)"
RETRIEVED_TITLE = "Context: retrieved sections"
IDENTICAL_TITLE = "Context: conditions identical for a task"
STATIC_LAYERS = ("hardware", "templates", "contracts", "patterns", "hints")


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    header: dict[str, Any] = {}
    rounds: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        kind = rec.get("type")
        if kind == "episode":
            header = rec
        elif kind == "round":
            rounds.append(rec)
        elif kind == "result":
            result = rec
    return header, rounds, result


def _columns_of(header: dict[str, Any]) -> set[str]:
    """The layer columns an episode's condition can fill: its static layers, and retrieved:<source> for
    each source it retrieves from (empty for a transcript without the condition, which then shows all)."""
    spec = header.get("condition_spec") or {}
    cols = set(spec.get("static") or [])
    retrieval = spec.get("retrieval") or {}
    if retrieval.get("enabled"):
        cols |= {f"retrieved:{src}" for src in retrieval.get("sources") or []}
    return cols


def context_sections(out: Path | str, top_sections: int = 12) -> list[Section]:
    """The context sections of a study's report (tokens per layer per condition, the retrieved sections
    shown most, conditions identical for a task), in the report's document model."""
    out = Path(out).expanduser().resolve()
    with BenchStore(out, create=False) as store:
        rows = [r for r in store.episodes() if r.status == "done" and r.transcript_jsonl]
    per_group: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    sections: dict[str, dict[tuple[str, str, str], list[int]]] = defaultdict(lambda: defaultdict(list))
    prints: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    layers_seen: list[str] = []
    applies: dict[tuple[str, str], set[str]] = defaultdict(set)  # the columns a group's condition has
    for row in rows:
        path = out / row.transcript_jsonl if row.transcript_jsonl else None
        if path is None or not path.is_file():
            continue
        header, rounds, result = _read(path)
        applies[(row.condition, model_label(row.model))] |= _columns_of(header)
        vals: dict[str, float] = defaultdict(float)
        for r in rounds:
            for k, v in (r.get("layer_tokens") or {}).items():
                if k.startswith("retrieved:"):
                    vals[k] += v
                else:
                    vals[k] = v  # a static layer is the same every round: tokens per request
                if k not in layers_seen:
                    layers_seen.append(k)
            vals["history"] += r.get("history_tokens", 0)
            vals["sent"] += r.get("sent_tokens", 0)
            for sec in (r.get("retrieved") or {}).get("sections", []):
                key = (sec["source"], sec.get("version", ""), f"§{sec['section_number']} {sec['title']}")
                sections[row.condition][key].append(sec["tokens"])
        vals["rounds"] = len(rounds)
        per_group[(row.condition, model_label(row.model))].append(vals)
        fp = result.get("context_fingerprint")
        if fp:
            prints[row.task_id][fp].add(row.condition)
    carried = Section(CARRIED_TITLE)
    if not per_group:
        carried.blocks.append(Paragraph("No finished episode has a transcript with context records."))
        return [carried]
    static = [k for k in STATIC_LAYERS if k in layers_seen]
    retrieved = sorted(k for k in layers_seen if k.startswith("retrieved:"))
    cols = [*static, *retrieved, "history", "sent"]
    carried.blocks.append(Paragraph(
        "Static layers: tokens in every request (the system prompt). Retrieved, history and sent: summed over "
        "an episode's rounds. Means over finished episodes; '–': the condition has no such layer or source.",
        "note"))  # fmt: skip
    table_rows = []
    for (cond, model), eps in sorted(per_group.items()):
        has = applies[(cond, model)]
        cells = [
            f"{mean(e.get(c, 0) for e in eps):.0f}"
            if c in has or c in ("history", "sent") or not has
            else "–"
            for c in cols
        ]
        table_rows.append([cond, model, str(len(eps)), f"{mean(e['rounds'] for e in eps):.1f}", *cells])
    carried.blocks.append(Table(["condition", "model", "episodes", "mean rounds", *cols], table_rows))
    out_sections = [carried]
    if sections:
        shown = []
        for cond in sorted(sections):
            ranked = sorted(sections[cond].items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top_sections]
            for (source, version, title), toks in ranked:
                shown.append(
                    [cond, title, f"{source} {version}".rstrip(), str(len(toks)), str(round(mean(toks)))]
                )
        out_sections.append(Section(RETRIEVED_TITLE, [Table(
            ["condition", "section", "source", "times shown", "tokens"], shown,
            caption=f"the {top_sections} sections shown most per condition, tokens as shown (mean)")]))  # fmt: skip
    same = [
        (task, sorted(conds))
        for task, fps in sorted(prints.items())
        for conds in fps.values()
        if len(conds) > 1
    ]
    identical = Section(IDENTICAL_TITLE)
    if same:
        identical.blocks.append(Paragraph(
            "These conditions put the same knowledge in front of the model for the task (same static text, "
            "same retrieval settings and budget, same history mode): their results measure the same thing.",
            "note"))  # fmt: skip
        identical.blocks.append(Table(["task", "identical conditions"],
                                      [[f"`{t}`", " = ".join(f"`{c}`" for c in conds)] for t, conds in same]))  # fmt: skip
    else:
        identical.blocks.append(Paragraph("None: every condition gave each task a different prompt."))
    out_sections.append(identical)
    return out_sections


def context_markdown(out: Path | str, top_sections: int = 12) -> str:
    """The context sections as Markdown (what ``context.md`` holds)."""
    text = to_markdown(Document("", context_sections(out, top_sections)))
    return text.split("\n", 2)[2]  # without the document title line


def write_context_report(out: Path | str, dest: Path | str | None = None) -> Path:
    """Write ``context.md`` into ``dest`` (default: the bench folder); returns its path."""
    target = Path(dest or out).expanduser().resolve()
    target.mkdir(parents=True, exist_ok=True)
    path = target / "context.md"
    path.write_text(context_markdown(out))
    return path

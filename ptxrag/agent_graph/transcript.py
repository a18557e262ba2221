"""Episode transcripts: JSON lines (one record per line, for programs) and Markdown (for people).

Both files are rewritten whole from the checkpointed state after every round, so a transcript never
disagrees with the checkpoint, even after a crash between the two.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .state import ContextBlock, RoundRecord


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_jsonl(
    path: Path, header: dict[str, Any], rounds: list[RoundRecord], result: dict[str, Any] | None
) -> None:
    lines = [json.dumps({"type": "episode", **header})]
    lines += [json.dumps({"type": "round", **r.model_dump(mode="json")}) for r in rounds]
    if result is not None:
        lines.append(json.dumps({"type": "result", **result}))
    _atomic_write(path, "\n".join(lines) + "\n")


def _fence(text: str, lang: str = "") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}\n"


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>\n"


def _context_list(block: ContextBlock) -> str:
    rows = [f"- {s.source} {s.version} §{s.section_number} {s.title} ({s.tokens} tokens"
            + (", needed by the task" if s.needed else "")
            + (", cut" if s.truncated else "") + (f"; query: `{s.query}`" if s.query else "") + ")"
            for s in block.sections]  # fmt: skip
    rows += [f"- note: {n}" for n in block.notes]
    return "\n".join(rows) or "- (nothing)"


def render_markdown(
    header: dict[str, Any], static: ContextBlock | None, system_prompt: str, rounds: list[RoundRecord],
    result: dict[str, Any] | None,
) -> str:  # fmt: skip
    out = [f"# Episode `{header['episode_id']}`\n"]
    out.append(
        f"- task: `{header['task_id']}`\n- condition: `{header['condition']}`\n- model: `{header['model']}`\n"
        f"- context budget: {header['budget_tokens']} tokens per round ({header['tokenizer']})\n"
        f"- round limit: {header['max_rounds']}\n"
    )
    if result is not None:
        out.append(
            f"**Result: {result['stop_reason']}** after {len(rounds)} round(s); best round: "
            f"{result.get('best_round')}"
            + (f"; error: {result['error']}" if result.get("error") else "")
            + "\n"
        )
    if static is not None:
        per = ", ".join(f"{k} {v}" for k, v in static.tokens_by_source().items()) or "nothing"
        out.append(
            f"## Static knowledge ({static.tokens} of {static.budget_tokens} tokens: {per})\n\n"
            f"{_context_list(static)}\n"
        )
    out.append(_details("system prompt", _fence(system_prompt, "markdown")))
    for r in rounds:
        out.append(f"## Round {r.round}: {r.outcome}\n")
        if r.queries:
            out.append("Queries:\n" + "\n".join(f"- `{q.text}` ({q.reason})" for q in r.queries) + "\n")
        if r.retrieved is not None:
            out.append(f"Retrieved ({r.retrieved.tokens} of {r.retrieved.budget_tokens} tokens):\n\n"
                       + _context_list(r.retrieved) + "\n")  # fmt: skip
        out.append(_details(f"prompt ({len(r.prompt)} characters)", _fence(r.prompt, "markdown")))
        out.append(_details("model reply", _fence(r.reply, "markdown")))
        if r.extraction_error:
            out.append(f"No code taken: {r.extraction_error}\n")
        if r.extraction_notes:
            out.append("Extraction: " + "; ".join(r.extraction_notes) + "\n")
        if r.report is not None:
            rows = ["| stage | status | message |", "| --- | --- | --- |"]
            for s in r.report.stages():
                msg = s.message.replace("|", "\\|").replace("\n", " ")[:300]
                rows.append(f"| {s.stage} | {s.status} | {msg} |")
            out.append("\n".join(rows) + "\n")
            if r.report.compile.log and r.report.compile.status == "failed":
                out.append(_fence(r.report.compile.log, "text"))
        out.append(context_line(r) + "\n")
        u = r.usage
        out.append(f"Tokens: {u.input_tokens} in, {u.output_tokens} out"
                   + (f", {u.cache_read_tokens} read from cache" if u.cache_read_tokens else "")
                   + f"; model {r.model_wall_s:.1f} s, evaluation {r.eval_wall_s:.1f} s\n")  # fmt: skip
    return "\n".join(out)


def context_line(r: RoundRecord) -> str:
    """What the round's request carried, in cl100k_base tokens: knowledge per layer, history, the whole."""
    layers = ", ".join(f"{k} {v}" for k, v in r.layer_tokens.items()) or "no knowledge"
    hist = f"history {r.history_tokens}"
    if r.rounds_summarized:
        hist += f" (rounds {', '.join(str(x) for x in r.rounds_summarized)} not resent verbatim)"
    stop = f"; stop reason {r.model_stop_reason}" if r.model_stop_reason else ""
    cut = " (cut off)" if r.cut_off else (f" ({r.continuations} continuation(s))" if r.continuations else "")
    return f"Context carried: {layers}; {hist}; whole request {r.sent_tokens} tokens{stop}{cut}"


def transcript_markdown(state: dict[str, Any]) -> str:
    """The Markdown transcript of a graph state (what ``build_graph().invoke(...)`` returns)."""
    from .replay import message_text
    from .tokens import TOKENIZER

    cond = state.get("condition")
    msgs = state.get("messages", [])
    header = {
        "episode_id": state.get("episode_id", "(graph invoked directly)"),
        "task_id": state.get("task_id", ""),
        "condition": getattr(cond, "name", str(cond)),
        "model": state.get("model_label", ""),
        "budget_tokens": getattr(cond, "budget_tokens", 0),
        "tokenizer": TOKENIZER,
        "max_rounds": state.get("max_rounds", 0),
    }
    result = None
    if state.get("stop_reason"):
        result = {"stop_reason": state["stop_reason"], "best_round": state.get("best_round"), "error": None}
    system = message_text(msgs[0]) if msgs else ""
    return render_markdown(header, state.get("static_context"), system, list(state.get("rounds", [])), result)


def write_markdown(path: Path, text: str) -> None:
    _atomic_write(path, text)

"""Prompt texts, rendered from the templates in ``prompts/`` (data, not code)."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from ptxrag.sandbox import EvaluationReport
from ptxrag.tasks import TaskSpec

from .state import ContextBlock, RoundRecord


@functools.cache
def template(name: str) -> Template:
    return Template((resources.files("ptxrag.agent_graph") / "prompts" / f"{name}.md").read_text())


@functools.lru_cache(maxsize=1)
def abi_header() -> str:
    return (resources.files("ptxrag.sandbox") / "abi" / "ptxrag_abi.h").read_text()


def knowledge_section(heading: str, block: ContextBlock | None) -> str:
    if block is None or not block.text.strip():
        return ""
    return template("knowledge").substitute(heading=heading, sections=block.text.strip())


def system_prompt(static: ContextBlock | None) -> str:
    know = knowledge_section("Reference material", static)
    return template("system").substitute(knowledge=know).strip() + "\n"


def _tensors(ts) -> str:  # noqa: ANN001 - list[TensorSpec]
    return ", ".join(f"`{t.name}` {t.dtype}[{', '.join(str(d) for d in t.shape)}]" for t in ts) or "none"


def task_prompt(task: TaskSpec, retrieved: ContextBlock | None) -> str:
    return (
        template("task")
        .substitute(
            task_id=task.id,
            title=task.title,
            statement=task.statement.strip(),
            arch=task.arch,
            gencode=task.gencode,
            required_ptx=", ".join(f"`{p}`" for p in task.required_ptx),
            inputs=_tensors(task.inputs),
            outputs=_tensors(task.outputs),
            scalars=", ".join(f"`{s.name}`={s.value:g}" for s in task.scalars) or "none",
            forbidden=", ".join(task.forbidden) or "nothing",
            check_shapes="; ".join(str(s) for s in task.shapes.check),
            abi_header=abi_header().strip(),
            knowledge=knowledge_section("Retrieved reference material", retrieved),
        )
        .strip()
        + "\n"
    )


def verdict_line(report: EvaluationReport | None) -> str:
    if report is None:
        return "no code"
    if report.success:
        return "success"
    f = report.first_failure
    if f is None:
        return "no failure found, but the GPU stages did not run"
    return f"{f.stage} {f.status}"


def report_feedback(report: EvaluationReport) -> str:
    """The verdict in words a model can act on: every stage, compiler errors, instruction evidence."""
    parts = [report.feedback()]
    absent = [p for p in report.static.instructions if not p.present]
    for p in absent:
        parts.append(
            f"`{p.ptx}` is not in the compiled SASS (looked for {', '.join(p.sass_patterns)}): "
            "the compiler never emitted it, so the kernel does not use it"
        )
    return "\n".join(parts)


def feedback_prompt(last: RoundRecord, retrieved: ContextBlock | None) -> str:
    if last.report is None:
        body = f"No kernel was evaluated: {last.extraction_error}"
        instruction = "Send the whole .cu file in one ```cuda code block."
    else:
        body = "```text\n" + report_feedback(last.report).strip() + "\n```"
        instruction = (
            "Fix what the verdict reports and send the whole corrected .cu file in one ```cuda block."
        )
    if last.extraction_notes:
        body += "\n\nAbout your reply: " + "; ".join(last.extraction_notes) + "."
    return (
        template("feedback")
        .substitute(
            round=last.round,
            verdict=verdict_line(last.report),
            feedback=body,
            instruction=instruction,
            knowledge=knowledge_section("Retrieved reference material", retrieved),
        )
        .strip()
        + "\n"
    )

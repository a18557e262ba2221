"""Retrieval queries: from the task in round 1, and from the last verdict afterwards.

Each query carries its reason, so a transcript shows why a section was retrieved. The queries follow
what went wrong: compiler errors (cleaned of paths, with the instruction they name), an instruction
missing from the SASS, an instruction compiled in but never executed, a wrong result.
"""

from __future__ import annotations

import re

from ptxrag.sandbox import EvaluationReport
from ptxrag.tasks import TaskSpec

from .state import RetrievalQuery, RoundRecord

#: the reason of the query made of the task's statement (round 1 only; see ``round_queries``)
STATEMENT_REASON = "task statement"

_ASM = re.compile(r"\basm\s*(?:volatile|__volatile__)?\s*\(\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)", re.S)
_LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")
_OPCODE = re.compile(r"^(?:@!?%?\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_:]+)*)")
# "ptxas /tmp/x.ptx, line 107; error   : Unknown ..." and "candidate.cu(12): error: ..."
_ERR_PREFIX = re.compile(r"^.*?(?:line \d+;|\(\d+\):|:\d+:(?:\d+:)?)\s*(?:fatal\s+)?error\s*:\s*", re.I)
_QUOTED = re.compile(r"'(\.?[A-Za-z_][\w.:]*)'|\"(\.?[A-Za-z_][\w.:]*)\"")
_NOISE = ("Ptx assembly aborted", "compilation terminated", "errors detected in the compilation")


def asm_instructions(code: str | None) -> list[str]:
    """PTX instructions (with modifiers) used in the inline assembly of ``code``, in order, distinct."""
    if not code:
        return []
    seen: dict[str, None] = {}
    for m in _ASM.finditer(code):
        body = "".join(_LITERAL.findall(m.group(1))).replace("\\n", "\n").replace("\\t", " ")
        for stmt in re.split(r"[;\n]", body):
            s = stmt.strip().lstrip("{}").strip()
            if not s or s.startswith((".reg", ".shared", ".local", "//")) or s.endswith(":"):
                continue
            op = _OPCODE.match(s)
            if op and "." in op.group(1):
                seen.setdefault(op.group(1), None)
    return list(seen)


def compiler_errors(log: str, limit: int = 4) -> list[str]:
    """The distinct error messages in a compiler log, without paths and line numbers."""
    out: list[str] = []
    for line in log.splitlines():
        if "error" not in line.lower() or any(n in line for n in _NOISE):
            continue
        msg = _ERR_PREFIX.sub("", line.strip()).strip()
        if msg and msg not in out:
            out.append(msg[:200])
        if len(out) >= limit:
            break
    return out


def _instruction_for(name: str, used: list[str], required: list[str]) -> str | None:
    """The full instruction a compiler message names: 'redux' -> 'redux.sync.add.i32' from the code;
    a modifier ('.i32') -> the instruction in the code that carries it."""
    if name.startswith("."):
        return next((ins for ins in used if name[1:] in ins.split(".")[1:]), None) if len(name) > 1 else None
    for ins in [*used, *required]:
        if ins == name or ins.startswith(name + "."):
            return ins
    # "redux.f32" (ptxas names the base and the offending modifier) -> "redux.sync.min.f32"
    head, _, rest = name.partition(".")
    mods = set(rest.split(".")) if rest else set()
    for ins in [*used, *required]:
        parts = ins.split(".")
        if mods and parts[0] == head and mods <= set(parts[1:]):
            return ins
    # "Parsing error near 'x64b'": the instruction in the code that holds the token
    if "." not in name and len(name) >= 3:
        return next((ins for ins in used if name in ins), None)
    return None


def task_queries(task: TaskSpec) -> list[RetrievalQuery]:
    qs = [RetrievalQuery(text=p, reason=f"required instruction {p}") for p in task.required_ptx]
    first = re.split(r"(?<=[.!?])\s", task.statement.strip(), maxsplit=1)[0]
    qs.append(RetrievalQuery(text=first[:300], reason=STATEMENT_REASON))
    return qs


def instruction_roots(task: TaskSpec) -> list[str]:
    """The names a section about one of the task's instructions mentions: the instruction's first
    component ('redux' of 'redux.sync', 'wgmma', 'mbarrier'), or its first two where the first is too short
    to tell anything apart ('cp.async', 'st.async')."""
    roots: dict[str, None] = {}
    for ins in task.required_ptx:
        parts = ins.split(".")
        roots.setdefault(parts[0] if len(parts[0]) >= 4 or len(parts) == 1 else ".".join(parts[:2]), None)
    return list(roots)


def mentions_any(text: str, roots: list[str]) -> bool:
    """Whether ``text`` names one of ``roots`` as a word ('redux' in 'redux.sync', not in 'reduxion')."""
    return any(re.search(rf"(?<![\w.]){re.escape(r)}(?![\w])", text) for r in roots)


def feedback_queries(task: TaskSpec, last: RoundRecord) -> list[RetrievalQuery]:
    """Queries for what the last verdict says went wrong (most specific first)."""
    rep: EvaluationReport | None = last.report
    if rep is None or rep.success:
        return []
    used = asm_instructions(last.code)
    required = list(task.required_ptx)
    qs: list[RetrievalQuery] = []
    if rep.compile.status == "failed":
        for err in compiler_errors(rep.compile.log or rep.compile.message):
            names = [a or b for a, b in _QUOTED.findall(err)]
            ins = next((i for n in names if (i := _instruction_for(n, used, required))), None)
            qs.append(RetrievalQuery(text=f"{ins} {err}" if ins else err, reason="compiler error"))
            if ins:
                qs.append(RetrievalQuery(text=ins, reason=f"instruction named by the compiler error: {err}"))
    elif rep.static.status == "failed":
        for p in rep.static.instructions:
            if not p.present:
                qs.append(RetrievalQuery(text=f"{p.ptx} syntax", reason=f"{p.ptx} is absent from the SASS"))
                qs.append(RetrievalQuery(text=p.ptx, reason=f"{p.ptx} is absent from the SASS"))
    elif rep.correctness.status == "failed":
        why = rep.correctness.message[:160]
        for ins in (used or required)[:3]:
            qs.append(RetrievalQuery(text=f"{ins} semantics", reason=f"wrong result: {why}"))
    elif rep.execution.status == "failed":
        for e in rep.execution.instructions:
            if not e.executed:
                reason = f"{e.ptx} compiled in but never executed"
                qs.append(RetrievalQuery(text=f"{e.ptx} semantics", reason=reason))
                qs.append(RetrievalQuery(text="predicated execution guard predicate", reason=reason))
    return qs


def round_queries(task: TaskSpec, last: RoundRecord | None, max_queries: int) -> list[RetrievalQuery]:
    """Round 1: the task. Later: the verdict's queries first, then the required instructions' (they find
    what is left). The task statement is asked in round 1 only: it names no instruction, so once its best
    sections were shown, each later round would get the next ones down its ranking, ever less related to
    the task (measured on warp-elect-sum: the mma, cvt, ldmatrix and tcgen05 sections by round 4) and
    scoring too close to its weak best for the relevance ratio to drop them."""
    if last is None:
        qs = task_queries(task)
    else:
        later = [q for q in task_queries(task) if q.reason != STATEMENT_REASON]
        qs = [*feedback_queries(task, last), *later]
    out: list[RetrievalQuery] = []
    seen: set[str] = set()
    for q in qs:
        key = q.text.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(q)
    return out[:max_queries]

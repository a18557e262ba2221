"""Test doubles for the agent's override points (AgentDeps): a knowledge pack, a retriever and a
sandbox. Each is labelled a double; the tests at the bottom check that they honour the interfaces the
real parts expose, so tests built on them test the agent, not the double."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ptxrag.agent_graph.knowledge import KnowledgeItem
from ptxrag.sandbox.results import (
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    InstructionPresence,
    StaticResult,
    TimingResult,
)
from ptxrag.tasks import TaskSpec

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MANUAL_91 = SHARED / "corpus" / "ptx-isa-9.1"


class PackDouble:
    """Knowledge-pack double: ``n`` documents of ``words`` words per layer, with recognisable titles."""

    def __init__(self, words: int = 300, per_layer: int = 2) -> None:
        self.words = words
        self.per_layer = per_layer
        self.asked: list[str] = []

    def documents(self, layer: str, task: TaskSpec) -> list[KnowledgeItem]:
        self.asked.append(layer)
        body = " ".join(f"{layer}-word{i}" for i in range(self.words))
        return [
            KnowledgeItem(layer, f"{layer}-{j}", f"{layer} document {j} for {task.id}", body)
            for j in range(self.per_layer)
        ]


@dataclass(frozen=True)
class HitDouble:
    """Carries the fields of ``ptxrag.indexer.Hit``."""

    section_number: str
    title: str
    version: str
    source: str
    url: str
    score: float
    text: str
    breadcrumb: str = ""
    instructions: tuple[str, ...] = ()


_WORD = re.compile(r"[a-z0-9_.:]+")


class ManualRetrieverDouble:
    """Retriever double: word-overlap search over the real PTX ISA 9.1 Markdown sections in shared/.

    Not the project's retriever (that is ptxrag.indexer): it exists so agent tests can run while
    seeing real manual text, and it records every call so tests can check what the agent asked."""

    def __init__(self, root: Path = MANUAL_91, limit_chars: int = 2500) -> None:
        if not root.is_dir():  # CI has ../shared; a clone without it skips these tests instead of failing
            pytest.skip(f"{root} (the shared PTX ISA 9.1 Markdown) is not here")
        self.calls: list[dict] = []
        self.docs: list[HitDouble] = []
        for p in sorted(root.rglob("*.md")):
            m = re.match(r"(\d+(?:_\d+)*)_(.*)", p.stem)
            if not m:
                continue
            text = p.read_text(errors="replace")[:limit_chars]
            self.docs.append(
                HitDouble(
                    m.group(1).replace("_", "."),
                    m.group(2).replace("_", " "),
                    "9.1",
                    "ptx-isa",
                    f"file://{p}",
                    0.0,
                    text,
                )
            )
        self._lock = threading.Lock()

    def version_for_arch(self, arch: str) -> str:
        return "9.1"

    def search(self, query, k=5, *, version=None, sources=None, exclude_sections=()):
        with self._lock:
            self.calls.append(
                {
                    "query": query,
                    "k": k,
                    "version": version,
                    "sources": sources,
                    "exclude_sections": tuple(exclude_sections),
                }
            )
        q = set(_WORD.findall(query.lower()))
        scored = []
        for d in self.docs:
            if d.section_number in exclude_sections:
                continue
            words = set(_WORD.findall((d.title + " " + d.text[:600]).lower()))
            s = len(q & words) + 3 * sum(1 for w in q if w in d.title.lower())
            if s:
                scored.append((s, d))
        scored.sort(key=lambda t: (-t[0], t[1].section_number))
        return [HitDouble(**{**d.__dict__, "score": float(s)}) for s, d in scored[:k]]


# -- sandbox double -----------------------------------------------------------------------------------


def report(task_id: str, verdict: str, ptx: str = "redux.sync") -> EvaluationReport:
    """A report shaped like the sandbox's for a verdict: success | compile | static | correctness |
    execution | unverified (CPU-side passed, GPU skipped) | error (a harness failure)."""
    sk = "an earlier stage did not pass"
    comp = CompileResult(status="passed", message="compiled")
    stat = StaticResult(
        status="passed",
        message=f"SASS contains {ptx}",
        instructions=[
            InstructionPresence(ptx=ptx, sass_patterns=["REDUX"], sass_found=["REDUX.SUM"], present=True)
        ],
    )
    corr = CorrectnessResult(status="passed", message="all checks passed")
    exe = ExecutionResult(status="passed", message=f"{ptx}: executed")
    tim = TimingResult(status="passed", message="speedup 1.2x", speedup=1.2)
    if verdict == "compile":
        comp = CompileResult(
            status="failed",
            message="compile error",
            log="ptxas /tmp/a.ptx, line 9; error   : Unknown modifier '.i32'",
        )
        stat, corr, exe, tim = (
            StaticResult(status="skipped", message=sk),
            CorrectnessResult(status="skipped", message=sk),
            ExecutionResult(status="skipped", message=sk),
            TimingResult(status="skipped", message=sk),
        )
    elif verdict == "static":
        stat = StaticResult(
            status="failed",
            message=f"{ptx} absent",
            instructions=[InstructionPresence(ptx=ptx, sass_patterns=["REDUX"], present=False)],
        )
        corr, exe, tim = (
            CorrectnessResult(status="skipped", message=sk),
            ExecutionResult(status="skipped", message=sk),
            TimingResult(status="skipped", message=sk),
        )
    elif verdict == "correctness":
        corr = CorrectnessResult(
            status="failed", message="check awkward {rows: 1000}: 3 of 1000 elements wrong"
        )
        exe, tim = ExecutionResult(status="skipped", message=sk), TimingResult(status="skipped", message=sk)
    elif verdict == "execution":
        from ptxrag.sandbox.results import InstructionExecution

        exe = ExecutionResult(
            status="failed",
            message=f"{ptx} is compiled in but never executed",
            instructions=[InstructionExecution(ptx=ptx, sass_rows=1, instructions_executed=10)],
        )
        tim = TimingResult(status="skipped", message="execution check did not pass")
    elif verdict == "unverified":
        corr = CorrectnessResult(status="skipped", message="skipped: no GPU")
        exe = ExecutionResult(status="skipped", message="skipped: no GPU")
        tim = TimingResult(status="skipped", message="skipped: no GPU")
    elif verdict == "error":
        exe = ExecutionResult(status="error", message="ncu (Nsight Compute) not found; set PTXRAG_NCU")
        tim = TimingResult(status="skipped", message=sk)
    elif verdict != "success":
        raise ValueError(verdict)
    success = verdict == "success"
    return EvaluationReport(
        task_id=task_id,
        source_sha256="0" * 64,
        arch="sm_90a",
        success=success,
        compile=comp,
        static=stat,
        correctness=corr,
        execution=exe,
        timing=tim,
    )


@dataclass
class ScriptedSandbox:
    """Sandbox double: returns the scripted verdicts in order (``raise`` raises); records the sources."""

    verdicts: list[str]
    seen: list[str] = field(default_factory=list)

    def evaluate(self, task: TaskSpec, source: str) -> EvaluationReport:
        i = len(self.seen)
        self.seen.append(source)
        v = self.verdicts[min(i, len(self.verdicts) - 1)]
        if v == "raise":
            raise OSError("nvcc vanished")
        return report(task.id, v)


def kernel_reply(tag: str) -> str:
    """A messy but valid reply: prose, then one cuda block whose code carries ``tag``."""
    return (
        f'Attempt {tag}: reduce each row with redux.sync.\n\n```cuda\n#include "ptxrag_abi.h"\n// {tag}\n'
        '__global__ void k(int* y) { int r; asm volatile("redux.sync.add.s32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(1)); y[0] = r; }\n'
        'extern "C" int ptxrag_launch(const ptxrag_args* a) {\n  k<<<1, 32, 0, a->stream>>>((int*)a->outputs[0].data);\n'
        "  return (int)cudaGetLastError();\n}\n```\n"
    )


# -- the doubles honour the real interfaces ------------------------------------------------------------


def test_hit_double_has_the_fields_of_the_real_hit():
    import pytest

    try:
        from ptxrag.indexer import Hit
    except ImportError:
        pytest.skip("ptxrag.indexer.Hit is not there yet")
    fields = set(getattr(Hit, "model_fields", None) or getattr(Hit, "__dataclass_fields__", {}))
    assert set(HitDouble.__dataclass_fields__) <= fields


def test_sandbox_double_reports_validate_like_the_sandbox_ones():
    for v in ("success", "compile", "static", "correctness", "execution", "unverified", "error"):
        rep = report("warp-reduce-redux", v)
        again = EvaluationReport.model_validate_json(rep.model_dump_json())
        assert again == rep
        assert (rep.first_failure is None) == (v in ("success", "unverified"))


def test_manual_double_reads_the_real_manual():
    r = ManualRetrieverDouble()
    assert len(r.docs) > 100
    hits = r.search("redux.sync", k=3)
    assert hits and any("redux" in h.title for h in hits)

"""Agent-side retrieval on recorded compiler feedback: for every harvested broken kernel
(``compiler-errors.json``: the real nvcc 13.0 log of compiling it), build the round-2 verdict the sandbox
would give (compile failed with that log, the kernel as the last code), let the agent build its feedback
queries (``agent_graph.queries.feedback_queries``) and retrieve under the ``rag`` condition, and check
that the first three sections shown contain one that explains the error (the kernel's expected
section or a descendant).

``PTXRAG_HOME=... python eval/retrieval/agent_feedback_eval.py [--json OUT]``"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ptxrag.agent_graph.conditions import load_condition
from ptxrag.agent_graph.queries import feedback_queries
from ptxrag.agent_graph.retrieval import retrieve_context
from ptxrag.agent_graph.state import RoundRecord
from ptxrag.indexer import Retriever
from ptxrag.indexer.evaluation import answers
from ptxrag.sandbox.results import (
    CompileResult,
    CorrectnessResult,
    EvaluationReport,
    ExecutionResult,
    StaticResult,
    TimingResult,
)
from ptxrag.tasks import load_task

HERE = Path(__file__).resolve().parent


def verdict(task_id: str, log: str) -> EvaluationReport:
    sk = "an earlier stage did not pass"
    return EvaluationReport(
        task_id=task_id,
        source_sha256="0" * 64,
        arch="sm_90a",
        success=False,
        compile=CompileResult(status="failed", message="compile error", log=log),
        static=StaticResult(status="skipped", message=sk),
        correctness=CorrectnessResult(status="skipped", message=sk),
        execution=ExecutionResult(status="skipped", message=sk),
        timing=TimingResult(status="skipped", message=sk),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--condition", default="rag")
    args = ap.parse_args()
    try:
        import torch
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, "blas")
        torch.set_num_threads(1)
    except ImportError:
        pass
    data = json.loads((HERE / "compiler-errors.json").read_text(encoding="utf-8"))
    cond = load_condition(args.condition)
    task = load_task("warp-reduce-redux")
    retriever = Retriever()
    rows = []
    for k in data["kernels"]:
        code = (HERE / "broken_kernels" / k["kernel"]).read_text(encoding="utf-8")
        last = RoundRecord(
            round=1,
            prompt="",
            reply="",
            code=code,
            report=verdict(task.id, "\n".join(k["errors"])),
            outcome="compile",
        )
        queries = feedback_queries(task, last)
        block = retrieve_context(cond, task, queries, retriever, [])
        top3 = [s.section_number for s in block.sections[:3]]
        ok = any(answers(n, e) for n in top3 for e in k["expect"])
        rows.append(
            {
                "kernel": k["kernel"],
                "expect": k["expect"],
                "queries": [q.text for q in queries],
                "top3": top3,
                "explained": ok,
                "shown": len(block.sections),
                "tokens": block.tokens,
                "budget": block.budget_tokens,
                "notes": block.notes,
            }
        )
    hit = sum(r["explained"] for r in rows)
    print(
        f"{hit}/{len(rows)} feedback rounds ({hit / len(rows):.3f}) show an explaining section in the top 3"
    )
    for r in rows:
        if not r["explained"]:
            print(f"  miss {r['kernel']}: expect {r['expect']} got {r['top3']} from {r['queries'][:2]}")
    mean_used = sum(r["tokens"] for r in rows) / len(rows)
    print(
        f"mean retrieved tokens {mean_used:.0f} of {rows[0]['budget']}; rounds with unused budget noted: "
        f"{sum(1 for r in rows if any('left unused' in n for n in r['notes']))}"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

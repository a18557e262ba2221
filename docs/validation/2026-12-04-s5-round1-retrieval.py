"""Round 1 of a retrieval condition on every suite task, with the real retriever: which sections each query
shows, and the notes (what was left out and why). Run from a checkout with PTXRAG_HOME holding an index of
PTX ISA 9.1 and the knowledge pack:

    PTXRAG_HOME=... python docs/validation/2026-12-04-s5-round1-retrieval.py [CONDITION]

The session-5 record (2026-12-04-s5-round1-retrieval.txt) ran it at the commit before the task statement's
sections had to name one of the task's instructions and at the commit after, on the same index."""

from __future__ import annotations

import sys

from ptxrag.agent_graph.conditions import load_condition
from ptxrag.agent_graph.queries import round_queries
from ptxrag.agent_graph.retrieval import default_retriever, retrieve_context
from ptxrag.tasks import list_tasks, load_task


def main() -> None:
    cond = load_condition(sys.argv[1] if len(sys.argv) > 1 else "rag+templates")
    retriever = default_retriever()
    total = statement = 0
    for spec in list_tasks():
        task = load_task(spec if isinstance(spec, str) else spec.id)
        queries = round_queries(task, None, cond.retrieval.max_queries)
        block = retrieve_context(cond, task, queries, retriever, [])
        total += block.tokens
        print(f"\n## {task.id} ({block.tokens} of {block.budget_tokens} retrieval tokens)")
        for s in block.sections:
            why = "statement" if s.query not in task.required_ptx else s.query
            statement += s.tokens if why == "statement" else 0
            print(
                f"  {s.source} {s.section_number} {s.title[:70]!r} {s.tokens} tok, score {s.score}, query: {why}"
            )
        for n in block.notes:
            print(f"  note: {n}")
    print(
        f"\n# all tasks: {total} retrieval tokens in round 1, {statement} of them from the statement's query"
    )


if __name__ == "__main__":
    main()

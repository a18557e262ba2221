"""ptxrag: agents that write GPU kernels with new PTX instructions, and an evaluator that proves the
instructions really executed.

Public API (imported lazily, so ``import ptxrag`` stays fast):
    Sandbox, SandboxConfig, EvaluationReport   -- ptxrag.sandbox
    TaskSpec, load_task, list_tasks            -- ptxrag.tasks
    build_graph, run_task                      -- ptxrag.agent_graph
    run_bench                                  -- ptxrag.bench
    Retriever, build_index                     -- ptxrag.indexer
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Sandbox": "ptxrag.sandbox",
    "SandboxConfig": "ptxrag.sandbox",
    "EvaluationReport": "ptxrag.sandbox",
    "TaskSpec": "ptxrag.tasks",
    "load_task": "ptxrag.tasks",
    "list_tasks": "ptxrag.tasks",
    "build_graph": "ptxrag.agent_graph",
    "run_task": "ptxrag.agent_graph",
    "run_bench": "ptxrag.bench",
    "Retriever": "ptxrag.indexer",
    "build_index": "ptxrag.indexer",
}


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'ptxrag' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)

"""Run one agent episode offline: the bundled scripted model on warp-reduce-redux, with a user-defined
condition (examples/my-condition.toml), the real sandbox and the knowledge pack.

    python examples/run_episode.py [RUNS_DIR]

With a real model instead: model="anthropic:claude-sonnet-4-5" (needs ANTHROPIC_API_KEY) or
model="openai:qwen2.5-coder@http://localhost:8000/v1" (a vLLM or Ollama server).
"""

from __future__ import annotations

import sys
import tempfile
from importlib import resources
from pathlib import Path

from ptxrag import run_task
from ptxrag.agent_graph import load_condition

here = Path(__file__).resolve().parent
runs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="ptxrag-runs-"))
replay = resources.files("ptxrag.agent_graph") / "demo" / "warp-reduce-redux.toml"

condition = load_condition(here / "my-condition.toml")
result = run_task(
    "warp-reduce-redux",
    model=f"replay:{replay}",
    condition=condition,
    max_rounds=3,
    runs_dir=runs,
    on_event=lambda e: print(f"  round {e.round}: {e.outcome}") if e.kind == "round" else None,
)
static = result.static_context
print(
    f"condition {condition.name}: {static.tokens if static else 0} of {condition.budget_tokens} tokens static"
)
print(f"stop: {result.stop_reason}; best round {result.best_round}; {len(result.rounds)} rounds")
print(f"transcript: {result.transcript_md}")

"""The LangGraph state machine: prepare -> retrieve -> generate -> evaluate -> route -> (retrieve | end)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

from . import nodes
from .nodes import AgentDeps
from .state import CHECKPOINT_TYPES, AgentInput, AgentState

NODES = ("prepare", "retrieve", "generate", "evaluate", "route")


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> Any:
    """The compiled agent graph, for harnesses that drive LangGraph themselves:

        final = build_graph().invoke({"task_id": task.id, "condition": "templates"}, context=AgentDeps(...))
        transcript_markdown(final)   # the episode for people; final["rounds"] holds the records

    The input is an ``AgentInput``; ``run_task`` is the usual way (checkpoints, transcripts on disk)."""
    g = StateGraph(AgentState, input_schema=AgentInput, context_schema=AgentDeps)
    g.add_node("prepare", nodes.prepare)
    g.add_node("retrieve", nodes.retrieve)
    g.add_node("generate", nodes.generate)
    g.add_node("evaluate", nodes.evaluate)
    g.add_node("route", nodes.route)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "retrieve")
    g.add_edge("retrieve", "generate")
    g.add_edge("generate", "evaluate")
    g.add_edge("evaluate", "route")
    g.add_conditional_edges("route", nodes.after_route, {"retrieve": "retrieve", END: END})
    return g.compile(checkpointer=checkpointer)


def serializer() -> JsonPlusSerializer:
    """The checkpoint serializer, allowing exactly the state's own record types."""
    return JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)


@contextmanager
def sqlite_checkpointer(path: Path) -> Iterator[BaseCheckpointSaver]:
    """A SQLite checkpointer at ``path`` (created with its folder), closed on exit."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    path.parent.mkdir(parents=True, exist_ok=True)
    # several episodes (threads or processes) may share one file: wait for locks, let readers run
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60)
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        saver = SqliteSaver(conn, serde=serializer())
        saver.setup()
        yield saver
    finally:
        conn.close()

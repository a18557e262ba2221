"""An MCP server so any MCP client (another agent, an IDE) can use ptxrag's knowledge and evaluator.

Tools: ``search_ptx_docs``, ``read_section``, ``list_tasks``, ``evaluate_kernel``. Run it with
``ptxrag mcp`` (stdio). The retriever and the sandbox are created on first use; a missing index is
reported to the client as a tool error that says how to build one.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio

from ptxrag.sandbox.protocol import Evaluator

from .retrieval import default_retriever


def _hit_dict(hit: Any) -> dict[str, Any]:
    keys = ("section_number", "title", "version", "source", "url", "score", "breadcrumb", "text")
    return {k: getattr(hit, k, None) for k in keys}


class PtxragTools:
    """The tools' implementations, independent of MCP (the server adapts them)."""

    def __init__(self, retriever: Any = None, sandbox: Evaluator | None = None) -> None:
        self._retriever = retriever
        self._sandbox = sandbox

    @property
    def retriever(self) -> Any:
        if self._retriever is None:
            self._retriever = default_retriever()
        return self._retriever

    @property
    def sandbox(self) -> Evaluator:
        if self._sandbox is None:
            from ptxrag.sandbox import Sandbox

            self._sandbox = Sandbox()
        return self._sandbox

    def search_ptx_docs(
        self, query: str, k: int = 5, version: str | None = None, sources: list[str] | None = None
    ) -> list[dict[str, Any]]:
        if not query.strip():
            raise ValueError("query is empty")
        if not 1 <= k <= 50:
            raise ValueError("k must be between 1 and 50")
        return [_hit_dict(h) for h in self.retriever.search(query, k=k, version=version, sources=sources)]

    def read_section(
        self, number: str, version: str | None = None, source: str = "ptx-isa"
    ) -> dict[str, Any]:
        hit = self.retriever.read_section(number, version=version, source=source)
        if hit is None:
            raise ValueError(f"no section {number!r} in {source} {version or '(default version)'}")
        return _hit_dict(hit)

    def list_tasks(self) -> list[dict[str, Any]]:
        from ptxrag.tasks import list_tasks

        return [
            {"id": t.id, "title": t.title, "level": t.level, "family": t.family, "arch": t.arch,
             "required_ptx": list(t.required_ptx), "statement": t.statement.strip()}
            for t in list_tasks()
        ]  # fmt: skip

    def evaluate_kernel(self, task_id: str, source: str) -> dict[str, Any]:
        from ptxrag.tasks import load_task

        if len(source) > 1_000_000:
            raise ValueError("source is larger than 1 MB")
        task = load_task(task_id)
        rep = self.sandbox.evaluate(task, source)
        return {
            "success": rep.success,
            "first_failure": rep.first_failure.stage if rep.first_failure else None,
            "feedback": rep.feedback(),
            "report": rep.model_dump(mode="json"),
        }


def build_server(tools: PtxragTools | None = None) -> Any:
    """The MCP server (``mcp.server.MCPServer``) exposing the four tools."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    impl = tools or PtxragTools()
    server = MCPServer(
        "ptxrag",
        instructions=(
            "Search the PTX ISA manual and ptxrag's knowledge pack, list benchmark tasks, and evaluate a CUDA "
            "kernel (.cu implementing ptxrag_launch) in ptxrag's sandbox, which proves the task's PTX "
            "instructions really executed."
        ),
    )

    async def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the client gets the message (a missing index says what to run)
            raise ToolError(f"{type(e).__name__}: {e}") from e

    @server.tool(description="Search the PTX ISA manual and the knowledge pack; returns ranked sections.")
    async def search_ptx_docs(
        query: str, k: int = 5, version: str | None = None, sources: list[str] | None = None
    ) -> dict[str, Any]:
        return {"hits": await _call(impl.search_ptx_docs, query, k=k, version=version, sources=sources)}

    @server.tool(description="Read one section by number (e.g. 9.7.13.15.16) from a manual version.")
    async def read_section(
        number: str, version: str | None = None, source: str = "ptx-isa"
    ) -> dict[str, Any]:
        return await _call(impl.read_section, number, version=version, source=source)

    @server.tool(description="List the benchmark tasks: id, title, level, arch, required PTX, statement.")
    async def list_tasks() -> dict[str, Any]:
        return {"tasks": await _call(impl.list_tasks)}

    @server.tool(
        description=(
            "Evaluate a kernel for a task: compile, static SASS check, and on a GPU correctness, the Nsight "
            "Compute execution check and timing. Returns success, the first failing stage and feedback."
        )
    )
    async def evaluate_kernel(task_id: str, source: str) -> dict[str, Any]:
        return await _call(impl.evaluate_kernel, task_id, source)

    return server


def serve() -> None:
    """Serve over stdio until the client disconnects."""
    build_server().run("stdio")

"""LangChain adapters: the retriever as a ``BaseRetriever``, the sandbox as a tool.

from ptxrag.agent_graph.lc import PtxDocsRetriever, sandbox_tool
docs = PtxDocsRetriever(k=3).invoke("mbarrier.try_wait.parity")
verdict = sandbox_tool().invoke({"task_id": "warp-reduce-redux", "source": cu_text})
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ptxrag.sandbox.protocol import Evaluator

from .prompts import verdict_text
from .retrieval import default_retriever


class PtxDocsRetriever(BaseRetriever):
    """ptxrag's hybrid retriever (manual sections and knowledge-pack documents) for LangChain chains."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    k: int = 5
    version: str | None = None
    sources: list[str] | None = None
    retriever: Any = Field(
        default=None, exclude=True, description="a ptxrag.indexer.Retriever; default: the local index"
    )
    _inner: Any = PrivateAttr(default=None)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self._inner is None:
            self._inner = self.retriever if self.retriever is not None else default_retriever()
        hits = self._inner.search(query, k=self.k, version=self.version, sources=self.sources)
        return [
            Document(
                # the citation travels in the text: create_retriever_tool passes page_content only
                page_content=_cited(h),
                metadata={
                    "section_number": h.section_number,
                    "title": h.title,
                    "version": h.version,
                    "source": h.source,
                    "url": getattr(h, "url", ""),
                    "score": getattr(h, "score", None),
                },
            )
            for h in hits
        ]


def _cited(hit: Any) -> str:
    """``[source version, section N: title](url)`` above the section text, so a tool-using agent can cite it."""
    where = " ".join(str(x) for x in (hit.source, hit.version) if x)
    head = f"[{where}, section {hit.section_number}: {hit.title}]"
    url = getattr(hit, "url", "") or ""
    return f"{head}({url})\n{hit.text}" if url else f"{head}\n{hit.text}"


class _EvaluateArgs(BaseModel):
    task_id: str = Field(description="a ptxrag task id, e.g. warp-reduce-redux")
    source: str = Field(
        description='the whole .cu file implementing extern "C" int ptxrag_launch(const ptxrag_args*)'
    )


def sandbox_tool(sandbox: Evaluator | None = None) -> StructuredTool:
    """The sandbox as a LangChain tool named ``evaluate_kernel``; it returns the verdict as text."""
    holder: dict[str, Any] = {"sandbox": sandbox}

    def evaluate_kernel(task_id: str, source: str) -> str:
        from ptxrag.tasks import TaskError, load_task

        try:
            task = load_task(task_id)
        except TaskError as e:  # an error result for the agent, not a crash of its loop
            raise ToolException(str(e)) from None
        if holder["sandbox"] is None:
            from ptxrag.sandbox import Sandbox

            holder["sandbox"] = Sandbox()
        try:
            rep = holder["sandbox"].evaluate(task, source)
        except Exception as e:  # a harness failure (no compiler, the service down) is an error result too
            raise ToolException(f"the sandbox could not evaluate the kernel: {type(e).__name__}: {e}") from e
        head = (
            "SUCCESS"
            if rep.success
            else (
                f"FAILED at {rep.first_failure.stage}"
                if rep.first_failure
                else "NOT VERIFIED (GPU stages skipped)"
            )
        )
        return f"{head}\n{verdict_text(rep)}"

    return StructuredTool.from_function(
        evaluate_kernel,
        name="evaluate_kernel",
        description=(
            "Compile and check a CUDA kernel for a ptxrag task; on a GPU also check correctness, that the "
            "task's PTX instructions executed (Nsight Compute), and time it."
        ),
        args_schema=_EvaluateArgs,
        handle_tool_error=True,
    )

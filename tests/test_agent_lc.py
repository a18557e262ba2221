"""LangChain adapters: the retriever as a BaseRetriever, the sandbox as a tool."""

from __future__ import annotations

from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from test_agent_doubles import ManualRetrieverDouble, ScriptedSandbox

from ptxrag.agent_graph.lc import PtxDocsRetriever, sandbox_tool


def test_retriever_adapter_returns_documents_with_section_metadata():
    inner = ManualRetrieverDouble()
    r = PtxDocsRetriever(k=2, version="9.1", sources=["ptx-isa"], retriever=inner)
    assert isinstance(r, BaseRetriever)
    docs = r.invoke("redux.sync")
    assert len(docs) == 1 and "redux" in docs[0].metadata["title"]
    assert len(r.invoke("shared memory")) == 2
    assert docs[0].metadata["source"] == "ptx-isa" and docs[0].page_content
    head = docs[0].page_content.splitlines()[0]  # the citation survives create_retriever_tool (text only)
    assert f"section {docs[0].metadata['section_number']}" in head and docs[0].metadata["title"] in head
    assert inner.calls[0] == {
        "query": "redux.sync",
        "k": 2,
        "version": "9.1",
        "sources": ["ptx-isa"],
        "exclude_sections": (),
    }


def test_sandbox_tool_reports_the_verdict_as_text():
    sb = ScriptedSandbox(["static", "unverified", "success"])
    tool = sandbox_tool(sb)
    assert isinstance(tool, BaseTool) and tool.name == "evaluate_kernel"
    assert set(tool.args) == {"task_id", "source"}
    assert tool.invoke({"task_id": "warp-reduce-redux", "source": "A"}).startswith("FAILED at static")
    assert tool.invoke({"task_id": "warp-reduce-redux", "source": "B"}).startswith("NOT VERIFIED")
    assert tool.invoke({"task_id": "warp-reduce-redux", "source": "C"}).startswith("SUCCESS")
    assert sb.seen == ["A", "B", "C"]


def test_sandbox_tool_unknown_task_is_an_error_result_not_a_crash():
    sb = ScriptedSandbox(["success"])
    out = sandbox_tool(sb).invoke({"task_id": "no-such-task", "source": "A"})
    assert "unknown task 'no-such-task'" in out and "known tasks" in out
    assert sb.seen == []


def test_sandbox_tool_harness_failure_is_an_error_result_not_a_crash():
    out = sandbox_tool(ScriptedSandbox(["raise"])).invoke({"task_id": "warp-reduce-redux", "source": "A"})
    assert out == "the sandbox could not evaluate the kernel: OSError: nvcc vanished"


def test_create_retriever_tool_output_keeps_section_numbers_and_urls():
    """What a tool-calling agent reads is the tool's text, not the documents' metadata."""
    from langchain_core.tools import create_retriever_tool

    r = PtxDocsRetriever(k=2, version="9.1", sources=["ptx-isa"], retriever=ManualRetrieverDouble())
    docs = r.invoke("shared memory")
    tool = create_retriever_tool(r, "search_ptx_docs", "search the PTX ISA manual")
    text = tool.invoke({"query": "shared memory"})
    assert isinstance(text, str) and len(docs) == 2
    for d in docs:
        assert f"section {d.metadata['section_number']}: {d.metadata['title']}" in text
        if d.metadata["url"]:
            assert f"]({d.metadata['url']})" in text
    assert any(d.metadata["url"] for d in docs), "the double gives URLs, so the test sees them travel"

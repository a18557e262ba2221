"""ptxrag's retriever and sandbox as LangChain components, for use in your own chains and agents.

    python examples/langchain_adapters.py

Needs an index for the retriever part (`ptxrag index`); the sandbox part needs only nvcc.
"""

from __future__ import annotations

from ptxrag import load_task
from ptxrag.agent_graph.lc import PtxDocsRetriever, sandbox_tool
from ptxrag.agent_graph.retrieval import RetrievalUnavailable

# the retriever as a LangChain BaseRetriever: Documents with section metadata
try:
    docs = PtxDocsRetriever(k=2).invoke("H200 shared memory per SM")
    for d in docs:
        print(f"retrieved: [{d.metadata['source']}] {d.metadata['section_number']} {d.metadata['title']}")
except RetrievalUnavailable as e:
    print(f"retriever not available: {e}")

# the sandbox as a LangChain tool (what a tool-calling agent would call)
tool = sandbox_tool()
source = load_task("warp-reduce-redux").solution_source()
print(f"tool {tool.name}:")
print(tool.invoke({"task_id": "warp-reduce-redux", "source": source}))

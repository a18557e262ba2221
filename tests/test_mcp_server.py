"""The MCP server through a real MCP client session over stdio (``python -m ptxrag mcp``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from ptxrag.tasks import load_task

DEMO = Path(__file__).resolve().parents[1] / "ptxrag" / "agent_graph" / "demo" / "warp-reduce-redux.toml"


def _session(home: Path):
    from mcp import StdioServerParameters
    from mcp.client import Client

    env = {"PTXRAG_HOME": str(home), "PTXRAG_NO_GPU": "1", "HF_HUB_OFFLINE": "1", "OPENBLAS_NUM_THREADS": "1"}
    env["PATH"] = os.environ.get("PATH", "")
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "ptxrag", "mcp"], env=env))


def _payload(result) -> dict:
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_mcp_tools_answer_through_a_real_client(tmp_path):
    import tomllib

    bad_kernel = tomllib.loads(DEMO.read_text())["reply"][0]["text"]
    bad_kernel = bad_kernel[bad_kernel.index("```cuda") + 7 : bad_kernel.rindex("```")]
    good_kernel = load_task("warp-reduce-redux").solution_source()

    async def main() -> dict:
        out: dict = {}
        async with _session(tmp_path / "home") as c:
            out["tools"] = sorted(t.name for t in (await c.list_tools()).tools)
            out["tasks"] = _payload(await c.call_tool("list_tasks", {}))
            out["bad"] = _payload(
                await c.call_tool("evaluate_kernel", {"task_id": "warp-reduce-redux", "source": bad_kernel})
            )
            out["good"] = _payload(
                await c.call_tool("evaluate_kernel", {"task_id": "warp-reduce-redux", "source": good_kernel})
            )
            out["unknown"] = await c.call_tool("evaluate_kernel", {"task_id": "nope", "source": good_kernel})
            out["search"] = await c.call_tool("search_ptx_docs", {"query": "redux.sync"})
            out["section"] = await c.call_tool("read_section", {"number": "9.7.13.12"})
        return out

    out = anyio.run(main)
    assert out["tools"] == ["evaluate_kernel", "list_tasks", "read_section", "search_ptx_docs"]
    ids = {t["id"] for t in out["tasks"]["tasks"]}
    assert {"warp-reduce-redux", "bulk-copy-scale"} <= ids
    assert out["bad"]["success"] is False and out["bad"]["first_failure"] == "compile"
    assert "Unknown modifier" in out["bad"]["feedback"]
    good = out["good"]["report"]
    assert good["compile"]["status"] == "passed" and good["static"]["status"] == "passed"
    assert good["execution"]["status"] == "skipped" and "no GPU" in good["execution"]["message"]
    assert out["unknown"].is_error and "unknown task" in out["unknown"].content[0].text
    # no index in this PTXRAG_HOME: the tools say how to build one instead of failing silently
    for r in (out["search"], out["section"]):
        assert r.is_error and "ptxrag index" in r.content[0].text


def test_mcp_search_and_read_with_a_real_index(tmp_path):
    import ptxrag.corpus as corpus
    from ptxrag.indexer import build_index

    home = tmp_path / "home"
    # a small real index (the hardware cards of the knowledge pack) keeps this test to seconds
    build_index(home, knowledge_documents=list(corpus.iter_documents(sources=["hardware"])))

    async def main():
        async with _session(home) as c:
            found = _payload(await c.call_tool("search_ptx_docs", {"query": "H200 HBM bandwidth", "k": 2}))
            first = found["hits"][0]
            again = _payload(
                await c.call_tool(
                    "read_section", {"number": first["section_number"], "source": first["source"]}
                )
            )
            return found, again

    found, again = anyio.run(main)
    hits = found["hits"]
    assert hits and all(h["source"] == "hardware" for h in hits)
    assert "h200" in (hits[0]["section_number"] + hits[0]["title"]).lower()
    assert again["section_number"] == hits[0]["section_number"] and again["text"]

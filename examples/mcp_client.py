"""Talk to `ptxrag mcp` the way any MCP client does: start it over stdio, list and call its tools.

python examples/mcp_client.py [HOME]

MCP clients start the server with a clean environment (PTXRAG_HOME is not passed on), so the data
directory with the index goes on the server's command line: `ptxrag mcp --home HOME`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp import StdioServerParameters
from mcp.client import Client

import ptxrag
from ptxrag import load_task
from ptxrag.base.paths import home

HOME = sys.argv[1] if len(sys.argv) > 1 else str(home())
# the server runs the same ptxrag as this client (`-m` looks in the working directory first)
PACKAGE_ROOT = str(Path(ptxrag.__file__).resolve().parents[1])


async def main() -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "ptxrag", "mcp", "--home", HOME], cwd=PACKAGE_ROOT
    )
    async with Client(server) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        tasks = (await client.call_tool("list_tasks", {})).structured_content["tasks"]
        print("tasks:", ", ".join(t["id"] for t in tasks))
        source = load_task("warp-reduce-redux").solution_source()
        verdict = await client.call_tool(
            "evaluate_kernel", {"task_id": "warp-reduce-redux", "source": source}
        )
        print("evaluate_kernel:", verdict.structured_content["feedback"])
        found = await client.call_tool("search_ptx_docs", {"query": "redux.sync", "k": 2})
        if found.is_error:  # no index under HOME: the tool says how to build one
            print("search_ptx_docs:", found.content[0].text)
        else:
            print("search_ptx_docs:", [h["section_number"] for h in found.structured_content["hits"]])


anyio.run(main)

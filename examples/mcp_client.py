"""Talk to `ptxrag mcp` the way any MCP client does: start it over stdio, list and call its tools.

python examples/mcp_client.py
"""

from __future__ import annotations

import sys

import anyio
from mcp import StdioServerParameters
from mcp.client import Client

from ptxrag import load_task


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "ptxrag", "mcp"])
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


anyio.run(main)

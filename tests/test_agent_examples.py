"""The examples under examples/ run as a user would run them (GPU stages skipped here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(script: str, tmp_path: Path, *args: str, home: Path | None = None) -> str:
    env = {
        **os.environ,
        "PTXRAG_NO_GPU": "1",
        "PTXRAG_HOME": str(home or tmp_path / "home"),
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    p = subprocess.run(
        [sys.executable, str(REPO / "examples" / script), *args],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_run_episode_example(tmp_path):
    out = _run("run_episode.py", tmp_path, str(tmp_path / "runs"))
    assert "round 1: compile failed" in out and "condition hardware+contracts" in out
    assert "stop: unverified_no_gpu; best round 3; 3 rounds" in out
    assert list((tmp_path / "runs").glob("*/transcript.md"))


def test_langchain_adapters_example(tmp_path):
    import ptxrag.corpus as corpus
    from ptxrag.indexer import build_index

    home = tmp_path / "home"
    build_index(home, knowledge_documents=list(corpus.iter_documents(sources=["hardware"])))
    out = _run("langchain_adapters.py", tmp_path, home=home)
    assert "retrieved: [hardware]" in out
    assert "tool evaluate_kernel:" in out and "[static] passed: SASS contains redux.sync" in out


def test_langchain_adapters_example_without_an_index_says_so(tmp_path):
    out = _run("langchain_adapters.py", tmp_path)
    assert "retriever not available" in out and "ptxrag index" in out
    assert "[compile] passed" in out


def test_mcp_client_example(tmp_path):
    out = _run("mcp_client.py", tmp_path)
    assert "tools: search_ptx_docs, read_section, list_tasks, evaluate_kernel" in out
    assert "warp-reduce-redux" in out and "[static] passed" in out
    assert "search_ptx_docs: no index" in out or "ptxrag index" in out  # empty home: the tool says so


def test_mcp_client_example_reaches_the_index_through_the_home_argument(tmp_path):
    """The client starts the server with a clean environment: only `ptxrag mcp --home` gets it there."""
    import ptxrag.corpus as corpus
    from ptxrag.indexer import build_index

    home = tmp_path / "indexed-home"
    build_index(home, knowledge_documents=list(corpus.iter_documents(sources=["hardware"])))
    out = _run("mcp_client.py", tmp_path, str(home))
    assert "search_ptx_docs: [" in out and "ptxrag index" not in out

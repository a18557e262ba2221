"""Shared test setup: offline by default, GPU tests only where a suitable GPU exists."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

# Offline: no model hub, no telemetry, and numpy/torch thread pools that do not fight on 2 cores.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _hopper_gpu() -> bool:
    from ptxrag.sandbox.toolchain import detect_gpu

    gpu = detect_gpu()
    return gpu is not None and gpu.compute_capability == (9, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Files holding a test marked slow run first: `make test` deals whole files to two xdist workers in
    # this order (--dist loadfile --no-loadscope-reorder), so the long module fixtures start at once on
    # both cores instead of one of them starting last while the other core idles. The sort is stable.
    heavy = {item.nodeid.split("::", 1)[0] for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in heavy)
    # A slow test's module fixture (every task compiled, the whole manual indexed) runs inside its first
    # test's time limit: on a loaded machine it may take several times its idle minutes, so slow tests get
    # 30 minutes instead of pyproject's 10 (a hang still ends).
    for item in items:
        if "slow" in item.keywords and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(1800))
    if _hopper_gpu():
        return
    skip = pytest.mark.skip(reason="needs a Hopper GPU (run on the lent H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


#: environment variables that would let a test reach a real model provider (Anthropic, OpenAI, Azure, any
#: OpenAI-compatible base URL, LangSmith tracing)
_PROVIDER_ENV = re.compile(
    r"(API_KEY|_BASE_URL|_API_BASE|_ENDPOINT|^ANTHROPIC_|^OPENAI_|^AZURE_OPENAI|^LANGCHAIN_|^LANGSMITH_)",
    re.IGNORECASE,
)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own PTXRAG_HOME unless it sets one; a shared compile cache keeps tests fast."""
    home = tmp_path_factory.getbasetemp() / "ptxrag-home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("PTXRAG_HOME", str(home))
    for name in list(os.environ):  # no real model provider: no key, no base URL of any vendor
        if _PROVIDER_ENV.search(name):
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} (the project's shared data) is not here")
    return SHARED


@pytest.fixture(scope="module")
def mini_retriever(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Retriever over one small real index (the mini manual fixture and the knowledge pack), built once
    per test module (the reranker's and the reader's tests)."""
    from ptxrag.indexer import Retriever, add_manual, build_index
    from ptxrag.indexer.library import ManualChecks

    home = tmp_path_factory.mktemp("mini") / "home"
    add_manual(
        REPO / "tests" / "fixtures" / "manuals" / "ptx-isa-mini.html",
        version="9.1",
        home=home,
        checks=ManualChecks(min_sections=1, min_instruction_sections=1),
    )
    build_index(home)
    return Retriever(home)

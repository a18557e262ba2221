"""The design's boundaries, checked by import-linter against the contracts in pyproject.toml.

The first test runs the contracts on the package as it is. The others copy the package, add one import that
breaks one rule, and check that the contract for that rule then fails, so a contract that checks nothing
(a typo in a module name, a rule made vacuous by an ignore) fails here instead of passing silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONTRACTS = (
    "layers",
    "sandbox-alone",
    "indexer-alone",
    "data-no-agent",
    "library-no-cli",
    "bench-public-api",
    "agent-public-api",
    "no-cycles",
)


def _lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root`` with ``root/pyproject.toml`` (no cache: always fresh)."""
    args = ["--no-cache", "--no-logo", *(a for c in contracts for a in ("--contract", c))]
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_package_keeps_every_import_contract() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    # every contract ran: one listed here but missing from pyproject would make the count differ
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout, done.stdout


#: (contract, module file, import added to it); each import is one the design forbids. The sandbox and
#: indexer ones are allowed by the layers (corpus and tasks are below them) and caught only by their own
#: rule; the cycle is inside one package (nodes imports state), which the layers do not look at.
VIOLATIONS = [
    ("layers", "agent_graph/tokens.py", "import ptxrag.bench.metrics"),
    ("sandbox-alone", "sandbox/roofline.py", "import ptxrag.corpus"),
    ("indexer-alone", "indexer/fusion.py", "import ptxrag.tasks"),
    ("data-no-agent", "corpus/citations.py", "import ptxrag.agent_graph.state"),
    ("library-no-cli", "bench/metrics.py", "import argparse"),
    ("bench-public-api", "bench/plots.py", "from ptxrag.agent_graph.state import TokenUsage"),
    ("agent-public-api", "agent_graph/prompts.py", "from ptxrag.sandbox.results import StaticResult"),
    ("no-cycles", "agent_graph/state.py", "from ptxrag.agent_graph import nodes"),
]


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's Python files and pyproject.toml, copied once for the violation tests."""
    root = tmp_path_factory.mktemp("contracts")
    shutil.copytree(
        REPO / "ptxrag",
        root / "ptxrag",
        ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or Path(d, n).is_dir())],
    )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize(("contract", "module", "line"), VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_a_forbidden_import_breaks_its_contract(
    package_copy: Path, contract: str, module: str, line: str
) -> None:
    # the copy keeps the contract before the edit
    assert _lint_imports(package_copy, contract).returncode == 0
    path = package_copy / "ptxrag" / module
    original = path.read_text()
    try:
        path.write_text(original + f"\n{line}  # noqa\n")
        done = _lint_imports(package_copy, contract)
    finally:
        path.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 broken" in done.stdout and " BROKEN" in done.stdout, done.stdout
    importer = f"ptxrag.{module[:-3].replace('/', '.')}"
    leaf = importer.rsplit(".", 1)[-1]
    # the report names the importer (cycles are shown relative to their package: ".state -> .nodes")
    assert importer in done.stdout or f".{leaf} ->" in done.stdout, done.stdout


def test_every_contract_has_a_violation_test() -> None:
    assert sorted(c for c, _, _ in VIOLATIONS) == sorted(CONTRACTS)

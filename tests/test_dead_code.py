"""No dead code: vulture, with the settings in pyproject.toml and the names in tests/vulture_whitelist.py,
finds nothing unused in the package (code used by tests, scripts, examples, benchmarks or docs counts as
used). The second test shows the same settings still catch a function nobody calls."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _vulture(cwd: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vulture", *paths], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_vulture_finds_no_unused_code() -> None:
    done = _vulture(REPO)
    # exit 3: dead code found; the lines name file, line and what is unused
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_the_settings_still_catch_an_unused_function(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(REPO / "tests" / "vulture_whitelist.py", tmp_path / "vulture_whitelist.py")
    (tmp_path / "mod.py").write_text(
        "def used() -> int:\n    return 1\n\n\ndef never_called() -> int:\n    return used()\n"
    )
    done = _vulture(tmp_path, "mod.py", "vulture_whitelist.py")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "mod.py:5: unused function 'never_called'" in done.stdout, done.stdout
    assert "'used'" not in done.stdout, done.stdout

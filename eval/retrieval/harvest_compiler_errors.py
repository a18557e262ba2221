"""Compile every deliberately broken kernel in broken_kernels/ with the local nvcc and record its real
error text, for the retrieval evaluation set (the text an agent's feedback round searches with).

Each kernel starts with header comments::

    // arch: sm_90a
    // expect: 9.7.13.15.16          (PTX ISA 9.1 section(s) that explain the error, comma separated)
    // what: one line on what is broken

Run from the repository root: ``python eval/retrieval/harvest_compiler_errors.py`` writes
``eval/retrieval/compiler-errors.json`` (kernel, arch, expect, what, nvcc version, error lines). Temporary
file names in ptxas messages are replaced by ``<kernel>.ptx`` so the record is stable; line numbers stay.
A kernel that compiles is reported and left out (it is not broken)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "broken_kernels"
OUT = HERE / "compiler-errors.json"
_TMP = re.compile(r"/tmp/[^\s,:]*?(?:\.ptx|\.cu|\.cpp\d?\.ii)")


def header(path: Path) -> dict[str, str]:
    meta = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"//\s*(\w+):\s*(.*)", line)
        if not m:
            break
        meta[m.group(1)] = m.group(2).strip()
    return meta


def compile_errors(path: Path, arch: str) -> tuple[int, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["nvcc", f"-arch={arch}", "-cubin", "-o", str(Path(tmp) / "k.cubin"), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    lines = []
    for line in (proc.stderr + proc.stdout).splitlines():
        line = _TMP.sub(f"{path.stem}.ptx", line.replace(str(path), path.name)).strip()
        if "error" in line.lower() and "ptxas fatal" not in line.lower() and line not in lines:
            lines.append(line)
    return proc.returncode, lines


def main() -> int:
    version = (
        subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    )
    records, clean = [], []
    for path in sorted(KERNELS.glob("*.cu")):
        meta = header(path)
        rc, errors = compile_errors(path, meta["arch"])
        if rc == 0 or not errors:
            clean.append(path.name)
            continue
        records.append(
            {
                "kernel": path.name,
                "arch": meta["arch"],
                "expect": [e.strip() for e in meta["expect"].split(",")],
                "what": meta.get("what", ""),
                "errors": errors,
            }
        )
    OUT.write_text(json.dumps({"nvcc": version, "kernels": records}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(records)} kernels with errors -> {OUT}; compiled cleanly (left out): {clean}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

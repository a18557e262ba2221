"""Stage 2: what the binary contains. Disassembles the candidate (cuobjdump), reports which required
instructions appear in SASS, and rejects forbidden library use (source scan + dynamic symbols).

The binary is the candidate's work: host asm can put any bytes in any section (a crafted fatbin or ELF
header), so cuobjdump, nm and readelf parse it contained as the compiler is (``compile.run_compiler``: a
private copy in a folder of its own, scrubbed environment, caps, own uid, no network, a private root).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ptxrag.base.deadlines import describe_harness_timeout, harness_timeout

from .compile import CompilerStartError, run_compiler
from .opcodes import UnknownInstruction, opcode_of, resolve
from .results import InstructionPresence, StaticResult, Status
from .toolchain import ToolchainError, require_cuobjdump

_FUNC_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSN_RE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*(/\*.*)?$")


@dataclass
class Sass:
    """Disassembly: kernel name -> list of SASS instruction texts (predicate guard included)."""

    kernels: dict[str, list[str]] = field(default_factory=dict)

    def opcodes(self) -> dict[str, set[str]]:
        return {k: {opcode_of(i) for i in v} for k, v in self.kernels.items()}

    def all_opcodes(self) -> set[str]:
        return {op for ops in self.opcodes().values() for op in ops}


def parse_sass(text: str) -> Sass:
    sass = Sass()
    current: list[str] | None = None
    for line in text.splitlines():
        m = _FUNC_RE.match(line)
        if m:
            current = sass.kernels.setdefault(m.group(1), [])
            continue
        if current is None:
            continue
        m = _INSN_RE.match(line)
        if m and m.group(2) and not m.group(2).startswith("/*"):
            current.append(m.group(2).strip().rstrip(";").strip())
    return sass


class HarnessTimeout(ToolchainError):
    """A tool the harness runs ran out of time (the machine was slow): a harness error, not the candidate's."""


#: the most output one tool may give (a large kernel's SASS is a few MB)
MAX_TOOL_OUTPUT_BYTES = 256 << 20


def run_tool(tool: Path, args: list[str], binary: Path, wait_s: float, what: str) -> tuple[int, str]:
    """``tool *args COPY`` on a private copy of ``binary``, contained (module docstring): (returncode,
    output with stderr merged). HarnessTimeout when it runs past ``wait_s``, ToolchainError when it is
    killed (memory, processes) or gives more than MAX_TOOL_OUTPUT_BYTES."""
    here = str(tool.resolve().parent)
    with tempfile.TemporaryDirectory(prefix="ptxrag-tool-") as base:
        os.chmod(base, 0o711)  # the tool's uid passes through to its own folder, lists nothing here
        work = Path(base) / "work"
        work.mkdir()
        copy = work / "candidate.so"
        if binary.is_file():  # else the tool says the file is missing
            shutil.copyfile(binary, copy)
        log = Path(base) / "out.txt"
        env = {"PATH": f"{tool.parent}{os.pathsep}/usr/bin:/bin"}  # cuobjdump calls the nvdisasm beside it
        try:
            rc, tracked = run_compiler(
                [str(tool), *args, str(copy)], work=work, log_path=log, timeout_s=wait_s, env=env,
                wall_s=wait_s, extra_roots=(here,), proc=True,  # cuobjdump finds nvdisasm via /proc/self/exe
            )  # fmt: skip
        except CompilerStartError as e:
            raise ToolchainError(f"{what}: could not start: {e}") from e
        if rc is None:
            reason = tracked.killed_reason or "killed"
            if reason.startswith("did not finish"):
                raise HarnessTimeout(describe_harness_timeout(what, wait_s))
            raise ToolchainError(f"{what} was stopped: it {reason}")
        if log.stat().st_size > MAX_TOOL_OUTPUT_BYTES:
            raise ToolchainError(f"{what} printed more than {MAX_TOOL_OUTPUT_BYTES >> 20} MiB")
        return rc, log.read_bytes().decode(errors="replace")


def disassemble(binary: Path, timeout_s: float | None = None) -> Sass:
    """SASS of `binary`. The deadline defaults to 60 s stretched by the machine's load (base/deadlines)."""
    cu = require_cuobjdump()
    wait_s = harness_timeout(60.0) if timeout_s is None else timeout_s
    rc, out = run_tool(cu, ["--dump-sass"], binary, wait_s, "cuobjdump --dump-sass")
    if rc != 0:
        raise ToolchainError(f"cuobjdump failed: {out.strip()[:500]}")
    return parse_sass(out)


# -- forbidden library use -----------------------------------------------------------------------------
#: kind -> (source regex, dynamic-symbol/NEEDED regex or None, reason the rule exists)
FORBIDDEN_RULES: dict[str, tuple[str, str | None, str]] = {
    "cublas": (
        r"\bcublas(?!Lt)\w*|#\s*include\s*[<\"]cublas",
        r"cublas(?!Lt)",
        "the task measures your kernel, not cuBLAS",
    ),
    "cublaslt": (r"\bcublasLt\w*", r"cublasLt", "the task measures your kernel, not cuBLASLt"),
    "cudnn": (r"\bcudnn\w*|#\s*include\s*[<\"]cudnn", r"cudnn", "the task measures your kernel, not cuDNN"),
    "cutlass": (
        r"\bcutlass::|#\s*include\s*[<\"]cutlass/",
        None,
        "write the PTX yourself; CUTLASS is not allowed",
    ),
    "cute": (r"\bcute::|#\s*include\s*[<\"]cute/", None, "write the PTX yourself; CuTe is not allowed"),
    "thrust": (r"\bthrust::|#\s*include\s*[<\"]thrust/", None, "library algorithms are not allowed"),
    "cub": (r"\bcub::|#\s*include\s*[<\"]cub/", None, "library algorithms are not allowed"),
    "torch": (
        r"#\s*include\s*[<\"](torch|ATen|c10)/|\b(at|torch|c10)::",
        r"libtorch|libc10|\bat::",
        "calling PyTorch from the candidate is not allowed",
    ),
    # source only: the static CUDA runtime itself imports dlopen to reach libcuda
    "dlopen": (
        r"\bdlopen\s*\(|\bdlsym\s*\(|\bdlmopen\s*\(",
        None,
        "loading other libraries at run time could hide a library call",
    ),
    "triton": (r"\btriton\b", None, "Triton kernels are not allowed"),
}

_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def strip_comments(source: str) -> str:
    return _COMMENT_RE.sub(" ", source)


def _dynamic_symbols(binary: Path) -> str:
    """Undefined dynamic symbols and NEEDED libraries, as text ('' when binutils are missing)."""
    parts = []
    nm = shutil.which("nm")
    if nm:
        _, out = run_tool(Path(nm), ["-D", "--undefined-only"], binary, harness_timeout(30.0), "nm")
        parts.append(out)
    readelf = shutil.which("readelf")
    if readelf:
        _, out = run_tool(Path(readelf), ["-d"], binary, harness_timeout(30.0), "readelf")
        parts += [ln for ln in out.splitlines() if "NEEDED" in ln]
    return "\n".join(parts)


def forbidden_hits(source: str, binary: Path | None, forbidden: list[str]) -> list[str]:
    code = strip_comments(source)
    symbols = _dynamic_symbols(binary) if binary is not None else ""
    hits = []
    for kind in forbidden:
        src_re, sym_re, why = FORBIDDEN_RULES[kind]
        m = re.search(src_re, code)
        if m:
            hits.append(f"{kind}: source uses `{m.group(0).strip()}` ({why})")
            continue
        if sym_re and symbols:
            m = re.search(sym_re, symbols)
            if m:
                hits.append(f"{kind}: the library links `{m.group(0)}` ({why})")
    return hits


def static_check(source: str, library: Path, required_ptx: list[str], forbidden: list[str]) -> StaticResult:
    t0 = time.monotonic()
    try:
        sass = disassemble(library)
    except (ToolchainError, subprocess.TimeoutExpired, OSError) as e:
        return StaticResult(
            status="error", message=f"could not disassemble: {e}", wall_s=time.monotonic() - t0
        )
    ops = sass.all_opcodes()
    presence = []
    for ptx in required_ptx:
        try:
            req = resolve(ptx)
        except UnknownInstruction as e:
            return StaticResult(status="error", message=str(e), wall_s=time.monotonic() - t0)
        found = sorted(op for op in ops if req.matches(op))
        presence.append(
            InstructionPresence(ptx=ptx, sass_patterns=req.patterns, sass_found=found, present=bool(found))
        )
    try:
        hits = forbidden_hits(source, library, forbidden)
    except ToolchainError as e:  # a stalled or stopped nm/readelf (HarnessTimeout is one): the harness's
        return StaticResult(status="error", message=str(e), wall_s=time.monotonic() - t0)
    missing = [p.ptx for p in presence if not p.present]
    excerpt = _excerpt(sass, presence)
    status: Status
    if hits:
        status, msg = "failed", "forbidden: " + "; ".join(hits)
    elif missing:
        status = "failed"
        msg = (
            f"{', '.join(missing)} not found in the compiled SASS: the instruction is not in your code, or the "
            "compiler removed it (dead code, or its result unused)"
        )
    else:
        status = "passed"
        msg = "SASS contains " + ", ".join(f"{p.ptx} ({'/'.join(p.sass_found)})" for p in presence)
    return StaticResult(
        status=status,
        message=msg,
        instructions=presence,
        forbidden_hits=hits,
        kernels=sorted(sass.kernels),
        sass_excerpt=excerpt,
        wall_s=time.monotonic() - t0,
    )


def _excerpt(sass: Sass, presence: list[InstructionPresence], max_lines: int = 40) -> str:
    """SASS lines holding the required instructions, for artifacts and feedback."""
    wanted = {op for p in presence for op in p.sass_found}
    lines = []
    for k, insns in sass.kernels.items():
        hits = [i for i in insns if opcode_of(i) in wanted]
        if hits:
            lines.append(f"{k}:")
            lines += [f"  {i}" for i in hits[:10]]
    return "\n".join(lines[:max_lines])

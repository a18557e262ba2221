"""Mutation check (issue 15, class 6): rebuild the candidate with each required instruction's effect removed
or its result replaced, so the GPU worker can show that the output then changes (a hang also counts).

Mechanism: nvcc compiles once with ``--keep``; ``--dryrun`` gives the exact command sequence. Every
occurrence of the instruction in the kept .ptx (inline asm appears verbatim there) is removed
(side-effect instructions), has its destination registers set to 0 (register results), or, for an
asynchronous copy that completes on an mbarrier, is replaced by an ``mbarrier.complete_tx`` of its bytes on
the same barrier (``release``): the waiters go on without the data, so a kernel that waits for the copy but
never uses what it brought shows an unchanged output instead of hanging (a hang counts as changed, and took
tens of seconds to stop). Tensor copies name no byte count: their barriers' ``expect_tx`` is dropped instead
(``mbarrier.arrive.expect_tx`` becomes ``mbarrier.arrive``). Then nvcc's
remaining steps (ptxas -> fatbinary -> host compile -> link) are replayed in a copy of the keep directory.
The mutant's SASS must hold fewer of the instruction's opcodes than the original's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .compile import SOURCE_NAME, compile_flags
from .opcodes import OpcodeRow, UnknownInstruction, opcode_of, resolve, table
from .static import disassemble
from .toolchain import ToolchainError, toolchain

MutantStatus = Literal["built", "not_mutable", "not_found", "error"]


@dataclass(frozen=True)
class Mutant:
    instruction: str
    library_path: str | None
    status: MutantStatus
    occurrences: int
    how: str
    message: str
    build_s: float = 0.0


#: comments, and -lineinfo directives (`.loc ..., function_name $L__info_string3, ...` has no `;`)
_COMMENT_RE = re.compile(r"//[^\n]*|^[ \t]*\.(?:loc|file)\b[^\n]*", re.MULTILINE)
_STMT_RE = re.compile(r"(?P<guard>@!?%?[\w$]+\s+)?(?P<op>[a-z][\w.:]*)(?P<ops>(?:[^;{}]|\{[^{};]*\})*);")
_REG_DECL_RE = re.compile(r"\.reg\s+\.(\w+)\s+(%?[\w$]+)(<\d+>)?")


def _row_for(opcode: str, rows: tuple[OpcodeRow, ...]) -> OpcodeRow | None:
    """The most specific table row whose components appear, in order, in the PTX opcode (same first)."""
    parts = opcode.split(".")
    best: tuple[int, OpcodeRow] | None = None
    for r in rows:
        want = r.ptx.split(".")
        if want[0] != parts[0]:
            continue
        it = iter(parts[1:])
        if all(any(p == w for p in it) for w in want[1:]) and (best is None or len(want) > best[0]):
            best = (len(want), r)
    return best[1] if best else None


def _reg_types(ptx: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in _REG_DECL_RE.finditer(ptx)}


def _zero(reg: str, types: dict[str, str]) -> str:
    t = types.get(reg) or types.get(reg.rstrip("0123456789"), "b32")
    if t == "pred":
        return f"mov.pred {reg}, 0;"
    size = re.sub(r"\D", "", t) or "32"
    return f"mov.b{size} {reg}, 0;"


def _operands(ops: str) -> list[str]:
    """Top-level comma-separated operands (commas inside [...] or {...} stay)."""
    out, depth, cur = [], 0, ""
    for ch in ops:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _async_store_bytes(op: str) -> int:
    """Bytes an ``st.async`` / ``red.async`` completes on its barrier: element size x vector length."""
    parts = op.split(".")
    size = next(
        (int(re.sub(r"\D", "", p)) // 8 for p in reversed(parts) if re.fullmatch(r"[bsuf](32|64)", p)), 4
    )
    vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v[24]", p)), 1)
    return size * vec


def _complete_tx(guard: str, mbar: str, count: str) -> str:
    return f"{guard}mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 {mbar}, {count};"


def _release(guard: str, op: str, ops: str) -> tuple[str, bool]:
    """The ``release`` replacement of one copy statement, and whether its barrier's expect_tx must go."""
    operands = _operands(ops)
    if ".multicast" in op:
        return "", False  # it signals every destination CTA's barrier: removed (their waiters hang)
    if ".tensor" in op:
        return "", True
    if op.startswith(("st.async", "red.async")) and len(operands) >= 3:
        return _complete_tx(guard, operands[-1], str(_async_store_bytes(op))), False
    if len(operands) >= 4:  # cp.async.bulk [dst], [src], size, [mbar]
        return _complete_tx(guard, operands[3], operands[2]), False
    return "", False


def _drop_expect_tx(ptx: str) -> str:
    """``mbarrier.arrive.expect_tx ... state, [addr], tx`` -> ``mbarrier.arrive ... state, [addr]``; a
    standalone ``mbarrier.expect_tx`` goes."""
    masked = _COMMENT_RE.sub(lambda m: " " * len(m.group(0)), ptx)
    out, pos = [], 0
    for m in _STMT_RE.finditer(masked):
        op = m.group("op")
        if not (op.startswith("mbarrier.") and ".expect_tx" in op):
            continue
        guard = m.group("guard") or ""
        rest = op.replace(".expect_tx", "")
        operands = _operands(m.group("ops"))
        repl = f"{guard}{rest} {', '.join(operands[:-1])};" if ".arrive" in rest else ""
        out += [ptx[pos : m.start()], repl]
        pos = m.end()
    out.append(ptx[pos:])
    return "".join(out)


def mutate_ptx(ptx: str, requirement: str) -> tuple[str, int, str]:
    """(mutated text, occurrences, how) for one required instruction; how is 'remove', 'zero-result' or
    'release'."""
    req = resolve(requirement)
    how = mutation_of(req.rows[0])
    rows = table()
    masked = _COMMENT_RE.sub(lambda m: " " * len(m.group(0)), ptx)
    types = _reg_types(masked)
    out: list[str] = []
    pos = 0
    n = 0
    drop_expect = False
    for m in _STMT_RE.finditer(masked):
        row = _row_for(m.group("op"), rows)
        if row is None or row not in req.rows:
            continue
        guard = m.group("guard") or ""
        if how == "remove":
            repl = ""
        elif how == "release":
            repl, expect = _release(guard, m.group("op"), m.group("ops"))
            drop_expect = drop_expect or expect
        else:
            dest = m.group("ops").split(",")[0].strip()
            if dest.startswith("{"):
                dest = m.group("ops").split("}")[0]
            regs = [r for r in re.findall(r"%?[\w$]+", dest.replace("|", " ")) if not r.startswith("_")]
            repl = " ".join(f"{guard}{_zero(r, types)}" for r in regs)
        out.append(ptx[pos : m.start()])
        out.append(repl)
        pos = m.end()
        n += 1
    out.append(ptx[pos:])
    text = "".join(out)
    return (_drop_expect_tx(text) if drop_expect else text), n, how


def mutation_of(row: OpcodeRow) -> str:
    return row.mutation


def _dryrun(
    nvcc: Path, flags: list[str], keep: Path, lib: Path, src: Path
) -> tuple[dict[str, str], list[str]]:
    cmd = [str(nvcc), *flags, "--keep", "--keep-dir", str(keep), "--dryrun", "-o", str(lib), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=keep)
    env: dict[str, str] = {}
    steps: list[str] = []
    for ln in r.stderr.splitlines():
        if not ln.startswith("#$ "):
            continue
        body = ln[3:].strip()
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", body)
        if m and not steps:
            env[m.group(1)] = m.group(2)
        else:
            steps.append(body)
    return env, steps


def _expand(text: str, env: dict[str, str]) -> str:
    """nvcc's dryrun variables are textual (INCLUDES holds quoted flags): substitute them as text."""
    for k in sorted(env, key=len, reverse=True):
        text = text.replace("${" + k + "}", env[k]).replace("$" + k, env[k])
    return text


def _replay_from_ptxas(env: dict[str, str], steps: list[str], old: Path, new: Path, timeout_s: float) -> str:
    start = next(i for i, s in enumerate(steps) if s.startswith("ptxas"))
    script = "set -e\n" + "\n".join(_expand(s, env).replace(str(old), str(new)) for s in steps[start:]) + "\n"
    run_env = dict(os.environ)
    for k in ("PATH", "LD_LIBRARY_PATH"):
        if k in env:
            run_env[k] = _expand(env[k], {**env, k: run_env.get(k, "")})
    r = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=timeout_s, cwd=new, env=run_env
    )
    if r.returncode != 0:
        raise ToolchainError(f"mutant build failed: {(r.stderr or r.stdout).strip()[-600:]}")
    return r.stderr


def _count(lib: Path, requirement: str) -> int:
    req = resolve(requirement)
    sass = disassemble(lib)
    return sum(1 for k in sass.kernels.values() for i in k if req.matches(opcode_of(i)))


def build_mutants(
    source: str,
    gencode: str,
    required_ptx: list[str],
    *,
    timeout_s: float = 120.0,
    out_dir: Path | None = None,
) -> list[Mutant]:
    """One mutant per required instruction (see the module docstring). ``out_dir`` keeps the libraries."""
    tc = toolchain()
    flags = compile_flags(gencode, tc.extra_flags)
    root = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="ptxrag-mutants-"))
    base = root / "base"
    base.mkdir(parents=True, exist_ok=True)
    src = base / SOURCE_NAME
    src.write_text(source)
    lib = base / "candidate.so"
    env, steps = _dryrun(tc.nvcc, flags, base, lib, src)
    r = subprocess.run(
        [str(tc.nvcc), *flags, "--keep", "--keep-dir", str(base), "-o", str(lib), str(src)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=base,
    )
    if r.returncode != 0:
        msg = f"the candidate does not compile: {r.stderr.strip()[-400:]}"
        return [Mutant(p, None, "error", 0, "", msg) for p in required_ptx]
    ptx_files = sorted(base.glob("*.ptx"))
    original_ptx = ptx_files[0].read_text() if ptx_files else ""

    def one(i: int, req: str) -> Mutant:
        t0 = time.monotonic()
        try:
            row = resolve(req).rows[0]
        except UnknownInstruction as e:
            return Mutant(req, None, "error", 0, "", str(e))
        if row.mutation.startswith("none"):
            return Mutant(req, None, "not_mutable", 0, "none", row.mutation.partition(":")[2].strip())
        text, n, how = mutate_ptx(original_ptx, req)
        if n == 0:
            return Mutant(req, None, "not_found", 0, how, f"no `{req}` statement in the PTX")
        work = root / f"m{i}"
        shutil.copytree(base, work, dirs_exist_ok=True)
        (work / ptx_files[0].name).write_text(text)
        try:
            _replay_from_ptxas(env, steps, base, work, timeout_s)
            before, after = _count(lib, req), _count(work / lib.name, req)
        except (ToolchainError, subprocess.TimeoutExpired, OSError) as e:
            return Mutant(req, None, "error", n, how, str(e)[:600], time.monotonic() - t0)
        dt = time.monotonic() - t0
        if after >= before:
            msg = f"the mutant's SASS still has {after} of the {before} opcodes for `{req}`"
            return Mutant(req, None, "error", n, how, msg, dt)
        msg = f"{how}: {n} PTX statements; SASS opcodes {before} -> {after}"
        return Mutant(req, str(work / lib.name), "built", n, how, msg, dt)

    workers = max(1, min(len(required_ptx), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, range(len(required_ptx)), required_ptx))

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

Every compiler command here (the ``--dryrun``, the ``--keep`` build, each mutant's replay) reads the
candidate's text, so each runs contained exactly as the compile stage's nvcc does (``compile.run_compiler``:
scrubbed environment, caps, own uid, no network, private root holding only its own folder and the
toolchain). Its deadlines are harness deadlines: ``timeout_s`` stretched by the machine's load and
PTXRAG_TIMEOUT_SCALE, since the candidate already compiled within its own limit.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .compile import SOURCE_NAME, CompilerStartError, compile_env, compile_flags, read_log, run_compiler
from .opcodes import OpcodeRow, UnknownInstruction, opcode_of, resolve, table
from .static import Sass, disassemble
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


#: most compiler output read back from one contained command
_LOG_BYTES = 1 << 20


def _contained(
    cmd: list[str], work: Path, what: str, timeout_s: float, env: dict[str, str] | None = None
) -> str:
    """Run ``cmd`` contained in ``work`` (see the module docstring); its output, or ToolchainError."""
    log = work.parent / f"{work.name}.{what.split()[0]}.log"  # outside the folder the command may write
    try:
        rc, tracked = run_compiler(cmd, work=work, log_path=log, timeout_s=timeout_s, env=env)
    except CompilerStartError as e:
        raise ToolchainError(f"{what}: could not start: {e}") from e
    out = read_log(log, _LOG_BYTES)
    log.unlink(missing_ok=True)
    if rc is None:
        raise ToolchainError(f"{what}: {tracked.killed_reason or 'killed'}")
    if rc != 0:
        raise ToolchainError(f"{what} failed: {out.strip()[-600:]}")
    return out


def _dryrun(
    nvcc: Path, flags: list[str], keep: Path, lib: Path, src: Path, timeout_s: float
) -> tuple[dict[str, str], list[str]]:
    cmd = [str(nvcc), *flags, "--keep", "--keep-dir", str(keep), "--dryrun", "-o", str(lib), str(src)]
    env: dict[str, str] = {}
    steps: list[str] = []
    for ln in _contained(cmd, keep, "nvcc --dryrun", timeout_s).splitlines():
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
    run_env: dict[str, str] = {}
    base_env = compile_env(new)
    for k in ("PATH", "LD_LIBRARY_PATH"):
        if k in env:
            run_env[k] = _expand(env[k], {**env, k: base_env.get(k, "")})
    return _contained(["/bin/bash", "-c", script], new, "mutant build", timeout_s, run_env)


def _count(sass: Sass, requirement: str) -> int:
    req = resolve(requirement)
    return sum(1 for k in sass.kernels.values() for i in k if req.matches(opcode_of(i)))


def build_mutants(
    source: str,
    gencode: str,
    required_ptx: list[str],
    *,
    timeout_s: float = 120.0,
    out_dir: Path | None = None,
) -> list[Mutant]:
    """One mutant per required instruction (see the module docstring). ``out_dir`` keeps the libraries.
    ``timeout_s``: each compiler command's CPU budget and idle-machine deadline (stretched under load)."""
    tc = toolchain()
    flags = compile_flags(gencode, tc.extra_flags)
    root = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="ptxrag-mutants-"))
    base = root / "base"
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)  # a compile uid passes through to its own folder, lists nothing here
    src = base / SOURCE_NAME
    src.write_text(source)
    lib = base / "candidate.so"
    try:
        env, steps = _dryrun(tc.nvcc, flags, base, lib, src, timeout_s)
        keep = [str(tc.nvcc), *flags, "--keep", "--keep-dir", str(base), "-o", str(lib), str(src)]
        _contained(keep, base, "nvcc --keep", timeout_s)
    except ToolchainError as e:
        msg = f"the candidate does not compile for its mutants: {str(e)[-400:]}"
        return [Mutant(p, None, "error", 0, "", msg) for p in required_ptx]
    ptx_files = sorted(base.glob("*.ptx"))
    original_ptx = ptx_files[0].read_text() if ptx_files else ""
    base_sass: list[Sass] = []  # the original's SASS, disassembled once for every mutant (cuobjdump is slow)
    base_lock = threading.Lock()

    def original_sass() -> Sass:
        with base_lock:  # a failed disassembly is retried by the next mutant, as each used to run its own
            if not base_sass:
                base_sass.append(disassemble(lib))
            return base_sass[0]

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
            before, after = _count(original_sass(), req), _count(disassemble(work / lib.name), req)
        except (ToolchainError, OSError) as e:
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

"""No new processes from the candidate's process: a seccomp filter (libseccomp) installed before the
candidate library is loaded.

The worker's checks see a helper process only while it is still running when ``ptxrag_launch`` returns.
A candidate could fork and exec a helper with a clean environment (no LD_AUDIT, no CUPTI monitor), let it
open the output through CUDA IPC, compute, exit, and reap it before returning: no check would see it.
Once this filter is in place, creating a process or running a program kills the candidate's process
(SIGSYS; the worker reports it): ``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``, ``execve`` and
``execveat``. ``clone3`` fails with ENOSYS (its flags sit behind a pointer a filter cannot read), so
glibc falls back to ``clone``, whose flags it can: threads (``CLONE_THREAD``) stay allowed, as the CUDA
driver and CUPTI start their own. A filter cannot be removed by the process it confines, and it passes
to any thread started later.

Used by runner.py (the candidate's process, without ptxrag installed: imported by path beside it) and
launch_once.py (the process Nsight Compute profiles) when the evaluator asks for it
(``SandboxConfig.forbid_process_creation``, on by default since the session-10 H200 run showed that the CUDA
driver, CUPTI and Nsight Compute's injection never create a process in a confined process: every task's
reference passed every stage with it; ``PTXRAG_SANDBOX_NO_SPAWN=0`` turns it off)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_CMP_MASKED_EQ = 7
CLONE_THREAD = 0x00010000
#: calls that create a process or replace the program (any argument)
FORBIDDEN = ("fork", "vfork", "execve", "execveat")


#: what a caller says when the filter cannot be installed
MISSING_HINT = (
    "it needs libseccomp.so.2 (e.g. the libseccomp2 package); PTXRAG_SANDBOX_NO_SPAWN=0 runs without the "
    "filter (weaker: a helper process reaped within a call then goes unseen)"
)


def scmp_act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class ArgCmp(ctypes.Structure):
    """struct scmp_arg_cmp"""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def forbid_process_creation() -> None:
    """Install the filter in this process (and every thread it starts from now on). Raises OSError when
    libseccomp is missing or the kernel refuses the filter: the caller must then not run the candidate."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:

        def rule(action: int, name: str, *cmp: ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a call on this architecture (vfork on some)
            arr = (ArgCmp * len(cmp))(*cmp) if cmp else None
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmp), arr)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {errno.errorcode.get(-rc, rc)}")

        for name in FORBIDDEN:
            rule(SCMP_ACT_KILL_PROCESS, name)
        # clone without CLONE_THREAD is a new process (fork, posix_spawn, subprocess)
        rule(SCMP_ACT_KILL_PROCESS, "clone", ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))
        rule(scmp_act_errno(errno.ENOSYS), "clone3")
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise OSError(-rc, f"seccomp_load: {errno.errorcode.get(-rc, rc)}")
    finally:
        lib.seccomp_release(ctx)

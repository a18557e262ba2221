"""Run untrusted work in a contained child process.

What this gives (and what it does not) is written down in docs/sandbox.md. In short, each child:
- starts in a fresh temporary directory with a clean environment (no API keys, HOME = its directory);
- leads its own session, so it and everything it forks is killed together (SIGKILL to the session,
  plus any process that still descends from it);
- has rlimits: no core files, bounded file size, open files, CPU seconds, and (for non-root users)
  processes;
- is watched: a thread samples its session's resident memory and process count and kills it when a
  bound is crossed (RLIMIT_AS cannot be used: the CUDA driver reserves terabytes of address space);
- has a wall-clock limit per request.
This is robustness against buggy and runaway kernels, not a security boundary against a determined
attacker; see docs/sandbox.md for how to add one.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 32 << 30  # resident memory of the whole session
    max_procs: int = 64  # processes in the session
    cpu_s: int = 600  # CPU seconds per process (RLIMIT_CPU backstop)
    file_bytes: int = 4 << 30  # largest file the child may write
    open_files: int = 1024
    #: run the child as this unprivileged uid (needs root). It cannot read files only the service user may read
    #: (0600 token files), write outside world-writable places and its own directory, or signal the service;
    #: RLIMIT_NPROC applies; every process of the uid is killed at the end. Use a uid nothing else uses.
    uid: int | None = None
    #: give the child an empty network namespace (needs root): no network, not even loopback
    isolate_network: bool = False
    #: RLIMIT_AS per process: a hard memory cap that makes allocations fail at once. Only for tools that do not
    #: reserve huge address ranges (compilers); never for CUDA processes (the driver reserves terabytes)
    address_space_bytes: int | None = None
    #: give the child a private mount namespace whose file system shows only these paths, read-only, plus its
    #: own directory (read-write), an empty /tmp and /dev/null, zero, random, urandom; everything else (the
    #: service's files, other jobs, /etc, /root, /home) does not exist there. As root directly; otherwise
    #: inside an unprivileged user namespace (same uid outside), with a network namespace when
    #: ``isolate_network``, where the kernel allows one (``user_namespaces_available``)
    read_roots: tuple[str, ...] | None = None
    #: with ``read_roots``: a /proc in the private root, for tools that find their helpers through
    #: /proc/self/exe (cuobjdump -> nvdisasm). As root a fresh procfs that shows only the child's own
    #: processes (``hidepid=invisible,subset=pid``); in a user namespace, where procfs cannot be mounted
    #: without a PID namespace, the caller's /proc (what the caller itself can read)
    proc: bool = False

    @staticmethod
    def isolated(uid: int = 64000) -> Limits:
        """Limits with a dedicated uid and no network, when running as root; plain limits otherwise."""
        if os.geteuid() != 0:
            return Limits()
        return Limits(uid=uid, isolate_network=True)


@dataclass
class Tracked:
    """Why a contained child was killed, when the watchdog or a deadline did it."""

    killed_reason: str | None = None
    peak_rss_bytes: int = 0
    peak_procs: int = 0
    seen: dict[int, int | None] = field(default_factory=dict)  # pid -> start time, every member observed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def kill_for(self, reason: str) -> None:
        with self._lock:
            if self.killed_reason is None:
                self.killed_reason = reason


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session id) for every process we can see."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read().decode(errors="replace")
        except OSError:
            continue
        rest = data[data.rfind(")") + 2 :].split()
        try:
            table[int(entry.name)] = (int(rest[1]), int(rest[3]))
        except (IndexError, ValueError):
            continue
    return table


def session_members(root_pid: int) -> set[int]:
    """Processes in ``root_pid``'s session, plus any descendant that left it (setsid)."""
    table = _proc_table()
    members = {pid for pid, (_, sid) in table.items() if sid == root_pid}
    members.add(root_pid)
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in table.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    return {p for p in members if p in table}


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        return int(data[data.rfind(")") + 2 :].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def kill_tree(root_pid: int, seen: dict[int, int | None] | None = None) -> None:
    """SIGKILL the session, every descendant, and every process ``seen`` in it earlier (a process that
    left the session and was orphaned is no longer a descendant), repeatedly until none is left."""
    for pid, start in (seen or {}).items():
        if pid != os.getpid() and start is not None and _start_time(pid) == start:  # not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root_pid, signal.SIGKILL)
        members = session_members(root_pid)
        alive = [p for p in members if p != os.getpid()]
        for p in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
        # the root itself may already be a zombie waiting for us; it is not "alive" in any useful sense
        if not [p for p in alive if p != root_pid]:
            return
        time.sleep(0.02)


CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_LIBC = ctypes.CDLL(None, use_errno=True)  # resolved before any fork


def _unshare(flags: int, what: str) -> None:
    if _LIBC.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({what}) failed")


def _unshare_net() -> None:
    _unshare(CLONE_NEWNET, "CLONE_NEWNET")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if x is None else x.encode() for x in (source, target, fstype, data)]
    if _LIBC.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def visible_roots(roots: tuple[str, ...]) -> list[str]:
    """The absolute, existing roots, each once, none inside another (a nested root is already visible)."""
    out: list[str] = []
    for r in sorted({os.path.normpath(os.path.abspath(r)) for r in roots}):
        if os.path.lexists(r) and not any(r == o or r.startswith(o.rstrip("/") + "/") for o in out):
            out.append(r)
    return out


def _bind(src: str, newroot: str, *, writable: bool) -> None:
    dest = newroot + src
    if os.path.islink(src):  # merged /usr: /bin -> usr/bin; recreate the link, it resolves inside the jail
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.symlink(os.readlink(src), dest)
        return
    if os.path.isdir(src):
        os.makedirs(dest, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        open(dest, "a").close()  # noqa: SIM115 - a mount point for one file
    _mount(src, dest, None, MS_BIND | MS_REC)
    if not writable:
        # keep the source mount's noexec and atime flags: in a user namespace they are locked
        kept = os.statvfs(src).f_flag & (os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME)
        relatime = (1 << 21) if os.statvfs(src).f_flag & os.ST_RELATIME else 0
        _mount(None, dest, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept | relatime)


def _enter_user_namespace(network: bool) -> None:
    """In a non-root child: a user namespace mapping only its own uid and gid (it gains no access outside),
    with a mount namespace, and a network namespace when ``network``."""
    uid, gid = os.getuid(), os.getgid()
    _unshare(CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWNET if network else 0), "CLONE_NEWUSER")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _mount_proc(newroot: str) -> None:
    target = newroot + "/proc"
    os.makedirs(target, exist_ok=True)
    try:
        _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | 8, "hidepid=invisible,subset=pid")  # 8: noexec
    except OSError:
        _mount("/proc", target, None, MS_BIND | MS_REC)  # a user namespace without its own PID namespace


def _enter_private_root(newroot: str, roots: tuple[str, ...], workdir: str, proc: bool = False) -> None:
    """In the child: a private mount namespace whose root is a fresh tmpfs holding only ``roots`` (read-only)
    and ``workdir`` (read-write), then chroot into it. Without root, the caller entered a user namespace."""
    if os.geteuid() == 0 and os.getuid() == 0:
        _unshare(CLONE_NEWNS, "CLONE_NEWNS")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks back to the host
    _mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    for r in visible_roots(roots):
        _bind(r, newroot, writable=False)
    os.makedirs(newroot + "/tmp", exist_ok=True)
    os.chmod(newroot + "/tmp", 0o1777)
    os.makedirs(newroot + "/dev", exist_ok=True)
    for dev in ("null", "zero", "random", "urandom"):
        if os.path.exists("/dev/" + dev):
            _bind("/dev/" + dev, newroot, writable=True)
    _bind(workdir, newroot, writable=True)
    if proc:
        _mount_proc(newroot)
    os.chroot(newroot)
    os.chdir(workdir)


_PR_SET_CHILD_SUBREAPER = 36


def _preexec(limits: Limits, workdir: str, newroot: str | None, subreaper: bool = False) -> None:
    # runs in the child between fork and exec
    if subreaper:
        # orphans of the child's tree are re-parented to the child (kept across its exec), so a process
        # that a grandchild started and left behind still descends from it and is found and killed with it
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.address_space_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space_bytes, limits.address_space_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
    jail = newroot is not None and limits.read_roots is not None
    if jail and os.geteuid() != 0:
        _enter_user_namespace(limits.isolate_network)
    elif limits.isolate_network:
        _unshare_net()  # before dropping privileges: it needs CAP_SYS_ADMIN
    if newroot is not None and limits.read_roots is not None:
        _enter_private_root(newroot, limits.read_roots, workdir, limits.proc)
    if limits.uid is not None and os.geteuid() == 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))
        os.setgroups([])
        os.setgid(limits.uid)
        os.setuid(limits.uid)
    elif os.geteuid() != 0:  # root ignores RLIMIT_NPROC; the watchdog covers it
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_procs, limits.max_procs))


@functools.cache
def user_namespaces_available() -> bool:
    """Whether this (non-root) process may give a child a user, mount and network namespace with a private
    root: tried once, on ``/bin/true`` in an empty jail."""
    if os.geteuid() == 0:
        return False
    root = tempfile.mkdtemp(prefix="ptxrag-root-probe-")
    work = tempfile.mkdtemp(prefix="ptxrag-probe-")
    limits = Limits(isolate_network=True, read_roots=("/usr", "/bin", "/lib", "/lib64"))

    def probe() -> None:
        _enter_user_namespace(True)
        _enter_private_root(root, limits.read_roots or (), work)

    try:
        done = subprocess.run(["/bin/true"], cwd=work, preexec_fn=probe, timeout=30, check=False)  # noqa: PLW1509
        return done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        os.rmdir(root)
        os.rmdir(work)


#: a top-level folder of a child's directory that stays the parent's: what the harness runs and trusts there
#: (worker_client.HARNESS_DIR); the child may read it, not write it
PARENT_OWNED_DIR = "harness"


def prepare_workdir(workdir: Path, limits: Limits) -> None:
    """Hand the child's directory (and what is in it) to the child's uid, when it has one; its
    ``PARENT_OWNED_DIR`` folder stays the parent's."""
    if limits.uid is None or os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(workdir):
        if Path(root) == Path(workdir):
            dirs[:] = [d for d in dirs if d != PARENT_OWNED_DIR]
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), limits.uid, limits.uid)
    os.chown(workdir, limits.uid, limits.uid)


def _is_zombie(pid: int) -> bool:
    """Dead but not reaped (its parent, maybe a container's init, has not waited): harmless, unkillable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
        return data[data.rfind(")") + 2 :].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def kill_uid(uid: int, keep: frozenset[int] = frozenset()) -> int:
    """SIGKILL every process owned by ``uid`` (the sandbox's own uid: nothing else runs as it) but ``keep``.
    Returns count."""
    if uid == 0 or uid == os.geteuid():
        raise ValueError("refusing to kill every process of the service's own uid or root")
    n = 0
    for _ in range(50):
        victims = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) not in keep:
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid and not _is_zombie(int(entry.name)):
                        victims.append(int(entry.name))
        if not victims:
            return n
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                n += 1
        time.sleep(0.02)
    return n


def clean_env(workdir: Path, keep: tuple[str, ...] = ()) -> dict[str, str]:
    """A minimal environment: no API keys or tokens reach candidate code."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "PYTHONPATH", *keep):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


class Contained:
    """A running contained child with a watchdog. Use as a context manager; exit kills everything."""

    def __init__(
        self,
        cmd: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        limits: Limits,
        stdout_path: Path,
        pass_fds: tuple[int, ...] = (),
        sweep_uid: bool = True,
        subreaper: bool = False,
    ) -> None:
        self.limits = limits
        #: kill every process of ``limits.uid`` on close. Turn it off for a child that shares its uid with another
        #: child still in use (the ncu launch beside the waiting GPU worker); the last one to close sweeps.
        self.sweep_uid = sweep_uid
        self.tracked = Tracked()
        prepare_workdir(cwd, limits)
        #: mount point of the private root (an empty directory; the tmpfs on it exists only in the child)
        self._newroot = (
            tempfile.mkdtemp(prefix="ptxrag-root-")
            if limits.read_roots is not None and (os.geteuid() == 0 or user_namespaces_available())
            else None
        )
        workdir, newroot = str(Path(cwd).resolve()), self._newroot
        self._out = open(stdout_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=lambda: _preexec(limits, workdir, newroot, subreaper),  # noqa: PLW1509
        )
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()

    def _watchdog(self) -> None:
        while not self._stop.wait(0.05):
            members = session_members(self.proc.pid)
            t = self.tracked
            for pid in members:
                if pid not in t.seen:
                    t.seen[pid] = _start_time(pid)
            if self.proc.poll() is not None:
                # the leader is gone; what it left behind is killed in close()
                return
            rss = sum(_rss(p) for p in members)
            t.peak_rss_bytes = max(t.peak_rss_bytes, rss)
            t.peak_procs = max(t.peak_procs, len(members))
            if len(members) > self.limits.max_procs:
                t.kill_for(f"started more than {self.limits.max_procs} processes (fork bomb?)")
                kill_tree(self.proc.pid, t.seen)
                return
            if rss > self.limits.memory_bytes:
                t.kill_for(f"used more than {self.limits.memory_bytes >> 20} MiB of host memory")
                kill_tree(self.proc.pid, t.seen)
                return

    def kill(self, reason: str) -> None:
        self.tracked.kill_for(reason)
        kill_tree(self.proc.pid, self.tracked.seen)

    def sweep(self) -> int:
        """SIGKILL everything the child started, keeping the child itself: its session's other members, the
        descendants that left it, and (with a sandbox uid, as root) every other process of the uid. For a
        child kept across jobs (the warm GPU worker) between two of them. Returns how many were killed."""
        keep = frozenset({self.proc.pid})
        victims = (session_members(self.proc.pid) - keep) - {os.getpid()}
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        n = len(victims)
        if self.limits.uid is not None and os.geteuid() == 0:
            n += kill_uid(self.limits.uid, keep)
        # SIGKILL lands asynchronously: wait (2 s at most) until the victims have died, so the child can
        # reap them before its next job counts what is running
        deadline = time.monotonic() + 2.0
        while any(not _is_zombie(p) for p in victims) and time.monotonic() < deadline:
            time.sleep(0.005)
        return n

    def close(self) -> None:
        self._stop.set()
        self._watch.join(timeout=1)
        kill_tree(self.proc.pid, self.tracked.seen)
        if self.sweep_uid and self.limits.uid is not None and os.geteuid() == 0:
            kill_uid(self.limits.uid)  # whatever escaped the session: it still runs as the sandbox's uid
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._out.close()
        if self._newroot is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._newroot)

    def __enter__(self) -> Contained:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        hint = {
            "SIGSEGV": " (segmentation fault on the host)",
            "SIGABRT": " (abort)",
            "SIGXCPU": " (CPU limit)",
            "SIGSYS": " (a forbidden system call: with the process-creation filter, creating a process)",
        }
        return f"killed by {name}{hint.get(name, '')}"
    return f"exited with code {returncode}"


def run_contained(
    cmd: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    limits: Limits,
    timeout_s: float,
    stdout_path: Path,
    sweep_uid: bool = True,
    launcher_grace_s: float | None = None,
    program_marker: str = "",
) -> tuple[int | None, Tracked]:
    """Run to completion (or kill at the deadline). Returns (returncode or None if killed, tracking).
    ``sweep_uid``: see :class:`Contained`. ``launcher_grace_s``: the child is a launcher of one program (Nsight
    Compute running the candidate), made a subreaper; the program is the first descendant whose command line
    contains ``program_marker``. Once it has exited, processes it left behind may keep the launcher waiting (it
    follows every process of the tree) for at most this long, then all is killed and the run is reported as
    killed for leaving processes running."""
    with Contained(
        cmd,
        cwd=cwd,
        env=env,
        limits=limits,
        stdout_path=stdout_path,
        sweep_uid=sweep_uid,
        subreaper=launcher_grace_s is not None,
    ) as c:
        deadline = time.monotonic() + timeout_s
        program: tuple[int, int] | None = None  # the launched program: pid, start time
        ended_at: float | None = None
        rc: int | None = None
        while True:
            try:
                rc = c.proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now >= deadline:
                c.kill(f"did not finish within {timeout_s:.0f} s")
                break
            if launcher_grace_s is None:
                continue
            if program is None:
                # the earliest-started match: a fork of the program (no exec) has the same command line
                found = [
                    (_start_time(p) or 0, p)
                    for p in session_members(c.proc.pid) - {c.proc.pid}
                    if program_marker in _cmdline(p)
                ]
                if found:
                    first_start, first_pid = min(found)
                    program = (first_pid, first_start)
                continue
            if ended_at is None:
                if _is_zombie(program[0]) or (_start_time(program[0]) or 0) != program[1]:
                    ended_at = now
            elif now - ended_at >= launcher_grace_s:
                left = session_members(c.proc.pid) - {c.proc.pid}
                if left:
                    c.kill(
                        f"left {len(left)} process(es) running after the launched program ended "
                        f"(killed {launcher_grace_s:.0f} s later)"
                    )
                    break
        return (rc if c.tracked.killed_reason is None else None), c.tracked


def tail(path: Path, max_chars: int = 2000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-max_chars:].decode(errors="replace")
    return ("..." if len(data) > max_chars else "") + text

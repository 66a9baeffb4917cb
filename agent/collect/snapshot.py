"""Run the external commands of `debugger collect`, each with a timeout, each writing one file, none ever fatal.

Why each command is optional and bounded: a hung node is exactly where a tool hangs too (nvidia-smi on a GPU that
fell off the bus, dcgmi on a wedged host engine), and one missing tool must not cost the rest of the evidence. A
command that is not installed is skipped and said so; one that runs past its timeout is stopped (SIGTERM, then
SIGKILL: only the command this module started) and recorded with what it wrote so far.

The commands and what their output looks like (the readers of the bundle parse these files, not this module):
- `py-spy dump --pid P` (py-spy 0.3.14 - 0.4.3, benfred/py-spy src/dump.rs): `Process P: <cmdline>`, `Python
  v3.11.2 (/usr/bin/python3.11)`, then per thread `Thread <tid> (idle|active|active+gil): "<name>"` (the name only
  when py-spy can read it) and its frames innermost first, `    func (file.py:line)`; `--native` adds frames like
  `    clock_nanosleep (libc.so.6)`. `--json`: a list of threads {pid, thread_id, thread_name, os_thread_id, active,
  owns_gil, frames: [{name, filename, module, short_filename, line, locals, is_entry, is_shim_entry}],
  process_info}. Without `--nonblocking` py-spy pauses the process while it reads the stacks (milliseconds).
  A refused ptrace prints `Permission Denied: Try running again with elevated permissions by going 'sudo env
  "PATH=$PATH" !!'` (py-spy's main.rs, for EPERM; measured here as uid 65534 against a root process: exit 1);
  a process gone: `Error: Failed to get process executable name. Check that the process is running.`; an
  interpreter py-spy cannot read (some pyenv/static builds): `Error: Failed to find python version from target
  process`.
- `ibstat` (infiniband-diags): per adapter `CA 'mlx5_0'`, then per port `Port 1:` and indented `State: Active`,
  `Link layer: InfiniBand` lines; perfquery is then run per (CA, port) as `perfquery -C <ca> -P <port>` (its
  output begins `# Port counters: Lid 5 port 1 (CapMask: 0x1400)`), or plain `perfquery` when no port was found.
- `dmesg -T` fails with `dmesg: read kernel buffer failed: Operation not permitted` when kernel.dmesg_restrict=1
  and the user lacks CAP_SYSLOG: then `journalctl -k --since -2h` (systemd-journald's copy of the kernel ring).
- `nvidia-smi -q`, `nvidia-smi topo -m`, `ibv_devinfo`, `dcgmi diag -r 1` (the quick DCGM diagnostic, on request
  only: it runs GPU tests): written as printed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainlog_debugger.tools.sources.collect.layout import (DCGMI_DIAG, DMESG, IBSTAT, IBV_DEVINFO, NVSMI_Q, NVSMI_TOPO,
                                                          PERFQUERY, stack_file)

MAX_STDERR = 4096  # what of a command's stderr the manifest keeps
MAX_PORTS = 64  # (CA, port) pairs queried with perfquery
GRACE_S = 5.0  # after SIGTERM, before SIGKILL
PIP_HINT = "pip install 'trainlog-debugger[collect]'"


@dataclass
class Ran:
    """One command run (or skipped): what the manifest says about it."""

    name: str
    command: list[str]
    file: str | None = None  # relative to the host's directory; None when nothing was written
    rc: int | None = None
    seconds: float = 0.0
    skipped: str | None = None
    error: str | None = None
    timed_out: bool = False
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = {"name": self.name, "command": " ".join(self.command), "file": self.file, "rc": self.rc,
             "seconds": round(self.seconds, 3), "skipped": self.skipped, "error": self.error}
        if self.timed_out:
            d["timed_out"] = True
        return d | self.extra


def which(cmd: str, path: str | None = None) -> str | None:
    return shutil.which(cmd, path=path if path is not None else os.environ.get("PATH", os.defpath))


def run_to_file(name: str, argv: list[str], host_dir: Path, rel: str, timeout: float, append: bool = False,
                header: str | None = None) -> Ran:
    """Run argv (argv[0] already resolved) with stdout into host_dir/rel; stderr kept (bounded) for the manifest.
    The command runs in host_dir, so whatever it writes by itself lands under --out too."""
    r = Ran(name, argv, file=rel)
    dest = host_dir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(dest, "ab" if append else "wb") as fh:
        if header:
            fh.write(header.encode() + b"\n")
            fh.flush()
        try:
            # its own process group: on a timeout the command AND whatever it started are stopped (a wrapper
            # script's child would otherwise hold the pipe open)
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=host_dir,
                                 start_new_session=True)
        except OSError as e:
            r.error, r.file = f"could not run: {e.strerror or e}", None
            return r
        err = b""
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            r.timed_out = True
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    _, err = p.communicate(timeout=GRACE_S)
                    break
                except subprocess.TimeoutExpired:
                    continue
            else:
                p.kill()
                p.wait()
    r.seconds, r.rc = time.monotonic() - t0, p.returncode
    err_text = (err or b"")[:MAX_STDERR].decode("utf-8", "replace").strip()
    if r.timed_out:
        r.error = f"stopped after the {timeout:g} s timeout" + (f": {err_text}" if err_text else "")
    elif r.rc != 0:
        r.error = err_text or f"exit code {r.rc}"
    if not append and dest.stat().st_size == 0:
        dest.unlink()
        r.file = None
    return r


# --- py-spy ----------------------------------------------------------------------------------------------------------

def find_pyspy() -> str | None:
    """$DEBUGGER_PYSPY when set (a py-spy installed elsewhere), else py-spy next to this Python (the [collect]
    extra's wheel puts it in the venv's bin/), else on PATH."""
    if (given := os.environ.get("DEBUGGER_PYSPY")):
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    here = Path(sys.executable).parent / "py-spy"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return which("py-spy")


def tool_version(argv: list[str], timeout: float = 10.0) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr)[:200].decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else None


_PTRACE_REFUSED = re.compile(r"Permission Denied|Operation not permitted|os error 1\)|os error 13\)|EPERM", re.I)
_GONE = re.compile(r"Check that the process is running|No such process|os error 3\)")
_NO_VERSION = re.compile(r"Failed to find python version")


def _ptrace_scope() -> str | None:
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text()[:8].strip()
    except OSError:
        return None


def _has_cap_sys_ptrace() -> bool | None:
    """CAP_SYS_PTRACE (bit 19) in this process's effective set, from /proc/self/status (None: unknown)."""
    try:
        for line in Path("/proc/self/status").read_text()[:16384].splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1][:16], 16) >> 19 & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def explain_failure(err: str, pid: int) -> tuple[str, str | None]:
    """(what went wrong, how to fix it) for a failed py-spy dump, from its stderr and what this node says about
    ptrace: a refusal names the user to run as, the capability and the Yama setting, as they stand here."""
    if _PTRACE_REFUSED.search(err):
        owner, me = _owner(pid), os.geteuid()
        fixes = []
        if owner is not None and owner != me and me != 0:
            fixes.append(f"run as the job's user (uid {owner}) or as root")
        elif me != 0:
            fixes.append("run as root")
        cap = _has_cap_sys_ptrace()
        if cap is False:
            fixes.append("in a container, start it with `--cap-add SYS_PTRACE` (Kubernetes: securityContext."
                         "capabilities.add: [SYS_PTRACE])")
        scope = _ptrace_scope()
        if scope and scope != "0":
            fixes.append(f"kernel.yama.ptrace_scope is {scope} here: attaching to a process that is not your child "
                         "needs root/CAP_SYS_PTRACE (or `sysctl kernel.yama.ptrace_scope=0`"
                         + (", impossible at 3 until reboot)" if scope == "3" else ")"))
        if not fixes:
            fixes.append("run as root with CAP_SYS_PTRACE (`--cap-add SYS_PTRACE` in a container) and check "
                         "kernel.yama.ptrace_scope")
        return "ptrace refused", "; ".join(fixes)
    if _GONE.search(err):
        return "the process is gone", None
    if _NO_VERSION.search(err):
        return ("py-spy could not read this interpreter (a Python build it does not recognise)",
                "run the job under a distribution's or python.org's build, or send faulthandler dumps "
                "(faulthandler.register(signal.SIGUSR1) in the script)")
    first = next((ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("Stack backtrace", " "))),
                 err[:200])
    return first.strip()[:300] or "py-spy failed", None


def dump_stacks(pyspy: str, pid: int, host_dir: Path, stem: str, timeout: float, native: bool = False,
                nonblocking: bool = False) -> list[Ran]:
    """`py-spy dump` of one process, as text (stacks/<stem>.pyspy.txt) and as JSON (…pyspy.json). The JSON run is
    skipped when the text one was refused: the second attempt would only be refused again."""
    opts = (["--native"] if native else []) + (["--nonblocking"] if nonblocking else [])
    out = []
    for fmt, extra in (("txt", []), ("json", ["--json"])):
        r = run_to_file(f"py-spy-{fmt}", [pyspy, "dump", "--pid", str(pid), *extra, *opts], host_dir,
                        stack_file(stem, fmt), timeout)
        if r.error and not r.timed_out:
            r.error, hint = explain_failure(r.error, pid)
            if hint:
                r.extra["fix"] = hint
        out.append(r)
        if r.error and fmt == "txt" and r.file is None:
            break
    return out


# --- node snapshots --------------------------------------------------------------------------------------------------

def ib_ports(ibstat_text: str) -> list[tuple[str, int]]:
    """(CA name, port number) of every port ibstat printed, in order, at most MAX_PORTS: what perfquery is asked
    about, read by the same parser that reads ibstat.txt afterwards (tools/sources/hw/ib.py)."""
    from trainlog_debugger.tools.sources.hw.ib import ports
    return ports(ibstat_text)[:MAX_PORTS]


def _skipped(name: str, argv: list[str], why: str) -> Ran:
    return Ran(name, argv, file=None, skipped=why)


def _one(name: str, argv: list[str], host_dir: Path, rel: str, timeout: float, path: str | None, **kw) -> Ran:
    exe = which(argv[0], path)
    if exe is None:
        return _skipped(name, argv, f"{argv[0]} not found on PATH")
    r = run_to_file(name, [exe, *argv[1:]], host_dir, rel, timeout, **kw)
    r.command = argv  # the manifest shows the command as typed, not the resolved path
    return r


def snapshots(host_dir: Path, timeout: float, dcgm: bool = False, path: str | None = None) -> list[Ran]:
    """Every node snapshot, in order; absent commands skipped and said so."""
    out = [_one("nvidia-smi-q", ["nvidia-smi", "-q"], host_dir, NVSMI_Q, timeout, path),
           _one("nvidia-smi-topo", ["nvidia-smi", "topo", "-m"], host_dir, NVSMI_TOPO, timeout, path)]
    ib = _one("ibstat", ["ibstat"], host_dir, IBSTAT, timeout, path)
    out += [ib, _one("ibv_devinfo", ["ibv_devinfo"], host_dir, IBV_DEVINFO, timeout, path)]
    ports = []
    if ib.file:
        try:
            ports = ib_ports((host_dir / ib.file).read_text("utf-8", "replace")[:1 << 20])
        except OSError:
            ports = []
    if which("perfquery", path) is None:
        out.append(_skipped("perfquery", ["perfquery"], "perfquery not found on PATH"))
    elif not ports:
        out.append(_one("perfquery", ["perfquery"], host_dir, PERFQUERY, timeout, path))
    else:
        for ca, port in ports:
            argv = ["perfquery", "-C", ca, "-P", str(port)]
            out.append(_one("perfquery", argv, host_dir, PERFQUERY, timeout, path, append=True,
                            header=f"### {' '.join(argv)}"))
    dm = _one("dmesg", ["dmesg", "-T"], host_dir, DMESG, timeout, path)
    out.append(dm)
    if dm.skipped or dm.rc != 0:
        if dm.file:  # what a refused dmesg printed is not the kernel log
            (host_dir / dm.file).unlink(missing_ok=True)
            dm.file = None
        out.append(_one("journalctl-k", ["journalctl", "-k", "--since", "-2h", "--no-pager"], host_dir, DMESG,
                        timeout, path))
    if dcgm:
        out.append(_one("dcgmi-diag", ["dcgmi", "diag", "-r", "1"], host_dir, DCGMI_DIAG, timeout, path))
    else:
        out.append(_skipped("dcgmi-diag", ["dcgmi", "diag", "-r", "1"], "not requested (--dcgm runs it)"))
    return out

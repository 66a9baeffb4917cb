"""The run that fills the bundle `debugger collect` writes. The layout itself (file names, collect.json's fields)
is a contract with the readers in tools/ and is defined once, in tools/sources/collect/layout.py; this module only
creates OUT/<host>, dumps, snapshots and writes the manifest.

OUT may already hold other hosts' collect directories (the same command runs on every node at once into a shared
directory); anything else in it is refused, so a typo'd --out never mixes the evidence into an unrelated folder.
Nothing is written outside OUT/<host>.
"""

from __future__ import annotations

import json
import platform
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from trainlog_debugger.agent.collect.discovery import Proc, discover
from trainlog_debugger.agent.collect.snapshot import PIP_HINT, dump_stacks, find_pyspy, snapshots, tool_version
from trainlog_debugger.tools.sources.collect.layout import FORMAT, HOST_DIR_NAMES, MANIFEST, VERSION, stack_stem



class CollectError(Exception):
    """Bad usage or nothing to collect: one line for the user, exit code 2."""


def host_name(given: str | None) -> str:
    """The host's directory name: --host, else socket.gethostname(). One path component, never `.`/`..`."""
    name = (given if given is not None else socket.gethostname()).strip()
    if not name or name in (".", "..") or "/" in name or "\0" in name or len(name) > 255:
        raise CollectError(f"--host must be one directory name, not {name!r}")
    return name


def _is_collect_dir(p: Path) -> bool:
    try:
        return p.is_dir() and not p.is_symlink() and all(c.name in HOST_DIR_NAMES for c in p.iterdir())
    except OSError:
        return False


def prepare(out: Path, host: str) -> Path:
    """Create OUT/<host> (and OUT) after the checks: OUT is absent, empty, or holds only other hosts' collect
    directories; OUT/<host> does not exist yet."""
    if out.exists() and not out.is_dir():
        raise CollectError(f"--out {out} exists and is not a directory")
    if out.is_dir():
        try:
            entries = list(out.iterdir())
        except OSError as e:
            raise CollectError(f"--out {out}: {e.strerror or e}") from None
        if (out / host).exists() or (out / host).is_symlink():
            raise CollectError(f"{out / host} already exists (an earlier collect of this host?): choose a new --out "
                               "or --host; it is never overwritten")
        strangers = [e.name for e in entries if not _is_collect_dir(e)]
        if strangers:
            raise CollectError(f"--out {out} is not empty and is not a collect directory (it holds "
                               f"{', '.join(sorted(strangers)[:3])}{', ...' if len(strangers) > 3 else ''}): "
                               "give a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        host_dir = out / host
        host_dir.mkdir()
    except FileExistsError:
        raise CollectError(f"{out / host} already exists: choose a new --out or --host") from None
    except OSError as e:
        raise CollectError(f"cannot create {out / host}: {e.strerror or e}") from None
    return host_dir


def stem(p: Proc) -> str:
    return stack_stem(p.pid, p.rank)


def _cmdline(p: Proc) -> str:
    from trainlog_debugger.tools.redact import redact_secrets
    return redact_secrets(" ".join(p.cmdline))[:4096]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("trainlog-debugger")
    except PackageNotFoundError:
        return "0+unknown"


def find(pids: list[int] | None) -> tuple[list[Proc], str]:
    """The processes to dump, or CollectError when there are none (nothing to collect on this node)."""
    procs, how = discover(pids)
    if pids:
        missing = sorted(set(pids) - {p.pid for p in procs})
        if missing:
            raise CollectError(f"no such process: {', '.join(map(str, missing))}")
    if not procs:
        raise CollectError("no training process found on this node (no torchrun agent's workers, no process with "
                           "RANK/LOCAL_RANK in its environment that this user may read): name them with --pid PID")
    return procs, how


def collect(out: Path, host: str | None = None, pids: list[int] | None = None, native: bool = False,
            nonblocking: bool = False, dcgm: bool = False, timeout: float = 60.0, path: str | None = None,
            progress=None) -> dict:
    """Collect this node into OUT/<host> and return the manifest (also written as collect.json). CollectError:
    bad usage, nothing found, or py-spy missing (checked before anything is written)."""
    name = host_name(host)
    pyspy = find_pyspy()
    if pyspy is None:
        raise CollectError(f"py-spy not found (next to {sys.executable} or on PATH): {PIP_HINT}")
    procs, how = find(pids)
    host_dir = prepare(out, name)
    say = progress or (lambda msg: None)
    manifest = {"format": FORMAT, "version": VERSION, "host": name,
                "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "found_by": how,
                "tools": {"trainlog-debugger": _version(), "python": platform.python_version(),
                          "py-spy": tool_version([pyspy, "--version"])},
                "options": {"native": native, "nonblocking": nonblocking, "dcgm": dcgm, "timeout_s": timeout},
                "processes": [], "snapshots": []}
    for p in procs:
        ran = dump_stacks(pyspy, p.pid, host_dir, stem(p), timeout, native=native, nonblocking=nonblocking)
        failed = next((r for r in ran if r.error), None)
        rec = {"pid": p.pid, "ppid": p.ppid, "rank": p.rank, "local_rank": p.get("LOCAL_RANK"),
               "world_size": p.get("WORLD_SIZE"), "group_rank": p.get("GROUP_RANK"),
               "master_addr": (p.env or {}).get("MASTER_ADDR"), "found_by": p.via, "cmdline": _cmdline(p),
               "dumps": [r.file for r in ran if r.file], "seconds": round(sum(r.seconds for r in ran), 3),
               "error": failed.error if failed else None, "fix": failed.extra.get("fix") if failed else None}
        if p.env is None:
            rec["env_error"] = p.env_error
        manifest["processes"].append(rec)
        say(rec)
    for r in snapshots(host_dir, timeout, dcgm=dcgm, path=path):
        manifest["snapshots"].append(r.to_json())
        say(r.to_json())
    tmp = host_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(host_dir / MANIFEST)
    return manifest

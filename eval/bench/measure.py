"""The benchmark's instruments (eval/bench/scan.py runs them): one timed run of a command (wall and CPU time, peak
memory of its whole process tree, the other load on the machine), the bundle held in the page cache, and the
methods the scan is compared with: the catalog's triggers as one ripgrep alternation and as a raw Hyperscan
database run by a bare 2-worker script (the engine's floor, without any of the scan's Python).

Why apart from scan.py: these say how a run is measured, scan.py what is run and judged; a change to how memory is
sampled or how the bundle is pinned reads here alone. Needs psutil (measure) and, for their methods, ripgrep and
hyperscan.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


# -- measuring one run ------------------------------------------------------------------------------------
def _busy_s() -> float:
    """CPU seconds all processes have spent busy since boot (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run_env(pycache: Path | None) -> dict | None:
    """The environment of the timed runs: Python's bytecode cache ON (in `pycache`, outside the tree), as on a
    user's machine, where pip compiled the wheel. A shell with PYTHONDONTWRITEBYTECODE=1 (this VM sets it) would
    otherwise make every `debugger` run recompile every module it imports: ~0.3 s of start-up that no user pays."""
    if pycache is None:
        return None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def measure(cmd: list[str], stdout_path: str, limit_s: float = 300.0, env: dict | None = None) -> dict:
    """Wall/CPU time, peak RSS of the process tree (sampled) and of its largest process, other load, of one run.
    A run past `limit_s` has its whole session killed (a hung worker must not eat the benchmark) and is reported
    with rc -9 and timed_out."""
    import psutil
    peak = [0]
    done = threading.Event()
    with open(stdout_path, "wb") as out, tempfile.TemporaryFile() as errf:  # a file, not a pipe: no deadlock
        busy0, self0 = _busy_s(), sum(os.times()[:2])
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=errf, start_new_session=True, env=env)
        killer = threading.Timer(limit_s, lambda: os.killpg(proc.pid, 9))
        killer.start()

        def sample():
            try:
                root = psutil.Process(proc.pid)
            except psutil.Error:
                return
            while not done.is_set():
                total = 0
                try:
                    procs = [root] + root.children(recursive=True)
                except psutil.Error:
                    procs = []
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                peak[0] = max(peak[0], total)
                done.wait(0.05)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        killer.cancel()
        try:  # workers left behind by a killed run
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        done.set()
        th.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    cpu = ru.ru_utime + ru.ru_stime
    other = max(0.0, _busy_s() - busy0 - cpu - (sum(os.times()[:2]) - self0)) / wall
    rss1 = ru.ru_maxrss * 1024
    return {"wall": wall, "cpu": cpu, "rss1": rss1, "rss_tree": max(peak[0], rss1), "rc": proc.returncode,
            "other": other, "stderr": err[-2000:], "timed_out": wall >= limit_s}


_PIN = """
import mmap, os, sys
maps = []
for p in sys.argv[1:]:
    with open(p, "rb") as f:
        if os.fstat(f.fileno()).st_size:
            maps.append(mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                  prot=mmap.PROT_READ))
print("pinned", flush=True)
sys.stdin.read()
"""


def pin(paths: list[str]) -> subprocess.Popen:
    """A helper process maps every file (MAP_POPULATE) for the whole benchmark so the bundle stays in the page
    cache. On this VM a DAMON scheme (kdamond: action=pageout of *unmapped* file pages idle for ~30 s) evicts
    read-once files within a minute: a 4 GiB `cat` then took 31 s from disk instead of <1 s; mapped pages are
    exempt. A separate process, because a fork of a process with 4 GiB mapped reports 4 GiB ru_maxrss even
    after exec. Closing its stdin ends it."""
    p = subprocess.Popen([sys.executable, "-c", _PIN, *paths], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    p.stdout.readline()
    return p


_RAW_HS = """
import os, sys
from multiprocessing import Pool
import hyperscan as hs

def work(paths):
    db = hs.loadb(open(sys.argv[1], "rb").read(), mode=hs.HS_MODE_BLOCK)
    db.scratch = hs.Scratch(db)
    n = [0]
    def on(*_):
        n[0] += 1
    for p in paths:
        with open(p, "rb") as f:
            buf = f.read()
        for base in range(0, len(buf), (1 << 32) - 1):
            db.scan(buf[base:base + (1 << 32) - 1], match_event_handler=on)
    return n[0]

paths = sys.argv[2:]
with Pool(2) as pool:
    print(sum(pool.map(work, [paths[i::16] for i in range(16)], chunksize=1)))
"""


_COMPILE = """
import sys
import hyperscan as hs
from trainlog_debugger.tools.sources import patterns
exprs = [p.trigger.encode() for p in patterns()]
db = hs.Database(mode=hs.HS_MODE_BLOCK)
db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=[0] * len(exprs))
open(sys.argv[1], "wb").write(hs.dumpb(db))
"""


def raw_hyperscan_cmd(db: Path, paths: list[str]) -> list[str]:
    """The raw-Hyperscan method's command line: the bare script over `paths` with the database raw_hyperscan_db
    wrote to `db`."""
    return [sys.executable, "-c", _RAW_HS, str(db), *paths]


def raw_hyperscan_db(path: Path, tree: Path | None = None) -> bool:
    """The catalog's triggers compiled into one Hyperscan database, serialized for the raw-Hyperscan method;
    `tree`: the catalog of another source tree (a PYTHONPATH root holding trainlog_debugger/), for an A/B."""
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree else None
    r = subprocess.run([sys.executable, "-c", _COMPILE, str(path)], env=env, cwd="/" if tree else None,
                       capture_output=True, text=True)
    if r.returncode:
        print(f"raw hyperscan skipped: {r.stderr.strip()[-300:]}")
    return r.returncode == 0


# -- ripgrep pattern file ---------------------------------------------------------------------------------
def build_alt(rg: str, path: Path) -> list[str]:
    """All catalog triggers as one alternation; triggers rg rejects are reported and left out."""
    from trainlog_debugger.tools.sources import patterns
    keep, bad = [], []
    for p in patterns():
        r = subprocess.run([rg, "-q", "-e", p.trigger, "/dev/null"], capture_output=True)
        if r.returncode == 2:  # 2 = error (bad regex); 1 = no match, as expected on /dev/null
            bad.append(f"{p.id}: {p.trigger!r}: {r.stderr.decode(errors='replace').strip()[-200:]}")
        else:
            keep.append(p.trigger)
    path.write_text("|".join(keep) + "\n")
    return bad


# -- counting rg -c output ---------------------------------------------------------------------------------
def rg_total(path: str) -> int:
    return sum(int(line.rsplit(":", 1)[1]) for line in Path(path).read_text().splitlines() if ":" in line)

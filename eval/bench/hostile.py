"""By-hand benchmark of issue 15's large hostile inputs: `python -m trainlog_debugger.eval.bench.hostile [--scale S]`.

Builds each input in a private temp dir (GB-scale when expanded, small on disk), runs `debugger ask` on it in a
subprocess with TMPDIR pointed at a fresh dir, and prints per input: seconds, peak RSS of the process tree (psutil,
polled every 20 ms), peak temp bytes used (polled), exit code and the first budget message. --scale 1 is the full
size (zip of 4,000 x 2 MiB members = 8 GiB, gzip/bz2 of 8 GiB of text, 100,000-member tar, 100,000-file dir);
smaller scales shrink every input. Not run in CI (tests/hostile holds the small variants).
"""

from __future__ import annotations

import argparse
import bz2
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
import zlib
from pathlib import Path

import psutil

LINE = b"[rank0]:I1105 12:30:00.000000 1 trainer.py:88] " + b"." * 4000 + b"\n"
FILLER = LINE * 512     # 2 MiB
WATCHDOG = (b"[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            b"operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            b"ran for 600012 milliseconds before timing out.\n")


def _gz_stream(path: Path, chunks: int, level=zlib.Z_BEST_COMPRESSION) -> None:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    block = c.compress(FILLER)
    with open(path, "wb") as f:
        f.write(block)
        for _ in range(chunks - 1):
            f.write(c.compress(FILLER))
        f.write(c.flush())


def build(root: Path, scale: float) -> dict[str, Path]:
    n = lambda k: max(10, int(k * scale))  # noqa: E731
    out = {}
    z = root / "zip_bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank_0.log", WATCHDOG.replace(b"{r}", b"0"))
        for i in range(n(4000)):
            zf.writestr(f"fill_{i:05d}.log", FILLER)
    out[f"zip bomb ({n(4000)} x 2 MiB members)"] = z
    g = root / "gz"
    g.mkdir()
    _gz_stream(g / "rank_1.log.gz", n(4000))
    (g / "rank_0.log").write_bytes(WATCHDOG.replace(b"{r}", b"0"))
    out[f"gzip bomb ({n(4000) * 2} MiB of text)"] = g
    b = root / "bz"
    b.mkdir()
    c = bz2.BZ2Compressor(9)
    with open(b / "rank_1.log.bz2", "wb") as f:
        for _ in range(n(4000)):
            f.write(c.compress(FILLER))
        f.write(c.flush())
    (b / "rank_0.log").write_bytes(WATCHDOG.replace(b"{r}", b"0"))
    out[f"bz2 bomb ({n(4000) * 2} MiB of text)"] = b
    t = root / "many.tar.gz"
    with tarfile.open(t, "w:gz", compresslevel=1) as tf:
        for i in range(n(100_000)):
            data = WATCHDOG.replace(b"{r}", str(i).encode())
            info = tarfile.TarInfo(f"logs/rank_{i}.log")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    out[f"tar of {n(100_000):,} tiny files"] = t
    d = root / "ranks"
    d.mkdir()
    for i in range(n(100_000)):
        (d / f"rank_{i}.log").write_bytes(WATCHDOG.replace(b"{r}", str(i).encode()))
    out[f"directory of {n(100_000):,} rank files"] = d
    # one long line with a hit every 70 bytes (issue 30: the line start was searched back to the buffer's start for
    # every hit, 186 s at 30 MB), and the same kind of text as one Cloud Logging JSON array
    ll = root / "long_line"
    ll.mkdir()
    hit = b"[rank0]: NCCL WARN NET/IB : Got completion with error 12, vendor err 129 "
    ll.joinpath("rank_0.log").write_bytes(b"[rank0]: start\n" + hit * n(400_000) + b"\n")
    out[f"one {len(hit) * n(400_000) / 1e6:.0f} MB line, a hit every {len(hit)} bytes"] = ll
    ca = root / "cloud_array"
    ca.mkdir()
    entry = ('{"timestamp": "2024-11-05T12:34:%02dZ", "severity": "ERROR", "textPayload": "[rank%d]: NCCL WARN NET/IB '
             ': Got completion with error 12", "labels": {"task": "workerpool0-%d"}}')
    with open(ca / "export.json", "w", encoding="utf-8") as f:
        f.write("[" + ",".join(entry % (i % 60, i % 8, i % 8) for i in range(n(400_000))) + "]")
    out[f"Cloud Logging JSON array of {n(400_000):,} entries"] = ca
    return out


def _du(path: str) -> int:
    total = 0
    for dp, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dp, f)).st_blocks * 512
            except OSError:
                pass
    return total


def run(path: Path, timeout: float) -> dict:
    tmp = tempfile.mkdtemp(prefix="hostile-bench-")
    env = dict(os.environ, TMPDIR=tmp)
    env.pop("ANTHROPIC_API_KEY", None)
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "trainlog_debugger.agent.cli.app", "ask", "--json", str(path)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ps, peak, disk, done = psutil.Process(p.pid), [0], [0], threading.Event()

    def poll():
        while not done.is_set():
            try:
                rss = sum(q.memory_info().rss for q in [ps] + ps.children(recursive=True))
            except psutil.Error:
                rss = 0
            peak[0] = max(peak[0], rss)
            disk[0] = max(disk[0], _du(tmp))
            done.wait(0.02)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    secs = time.monotonic() - t0
    done.set()
    th.join()
    text = out.decode("utf-8", "replace")
    m = re.search(r"(extraction stopped[^\"]*|files budget[^\"]*|compression ratio budget[^\"]*)", text)
    errs = err.decode("utf-8", "replace").strip().splitlines()
    msg = m.group(1) if m else (errs[-1] if errs and p.returncode else "")
    left = _du(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"s": secs, "rss_mb": peak[0] / 2**20, "tmp_mb": disk[0] / 2**20, "left": left, "rc": p.returncode,
            "msg": msg}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hostile-inputs-"))
    try:
        t0 = time.monotonic()
        inputs = build(root, a.scale)
        print(f"built inputs in {time.monotonic() - t0:.0f}s (scale {a.scale})", flush=True)
        for name, path in inputs.items():
            r = run(path, a.timeout)
            print(f"{name:34s} {r['s']:6.1f}s  rss {r['rss_mb']:5.0f} MiB  tmp peak {r['tmp_mb']:6.0f} MiB  "
                  f"left {r['left']}  rc {r['rc']}  {r['msg'][:160]}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

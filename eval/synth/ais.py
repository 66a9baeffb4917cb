"""Seeded generator of a storage-caused training failure: an `ais log get cluster` folder plus the job's worker logs.

Layout written under DEST (lines exactly as ../shared/FORMATS.md §4, §5, §1, §7.1 give them):

    ais_logs/aistarget-<ID>.tar.gz     flat tar of that target's INFO files (all rotations), like `ais log get cluster`
    ais_logs/aisproxy-<ID>.tar.gz
    workers/error-<job>-<n>.out        SLURM per-node files of torchrun --tee output (eval/synth/generate.py's Job helpers)
    truth.yaml                         what happened (the bundle reader never scans it)

The story (daemons keep UTC; the workers' wall clock is `worker_zone_min`, default UTC−07:00 = PDT, and says so
nowhere): each daemon has a file that started in the morning and a rotated one that spans midnight; the job reads
with batch GETs from 22:00 UTC. At 00:04 one target comes under memory and disk pressure, at 00:06:10 its
shared-dm streams break, an x-get-batch hits an out-of-bounds index, later receives are dropped, and its stats
show batch-GET and HTTP-write errors jump while proxies and the other targets stay flat. One second later rank
`culprit`'s loader logs a truncated batch stream, then AISBatchLoaderError, and stalls in sequential fallback GETs;
every other rank waits in the next BROADCAST until its watchdog fires 30 minutes later and the job dies (GET
counters stop). The pressured target restarts at 00:21 (new process, counters from zero). Healthy ranks print
connection resets that recover at retry 1/5: noise. `node_skew_s` sets worker node 1's clock ahead.

Run: `python -m trainlog_debugger.eval.synth.ais DEST [--seed N] [--filler N]`.
"""

from __future__ import annotations

import gzip
import io
import random
import sys
import tarfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from trainlog_debugger.eval.synth.generate import write_case
from trainlog_debugger.eval.synth.job import Job

D0 = datetime(2025, 8, 21)  # the daemons' UTC date when their first files start
JOB_ID = 4891784
BUCKET = "ais://train"


def hms(s: float) -> str:
    return (D0 + timedelta(seconds=s)).strftime("%H:%M:%S.%f")


def at(h: int, m: int = 0, s: float = 0.0, day: int = 0) -> float:
    """Seconds since D0 midnight UTC."""
    return day * 86400 + h * 3600 + m * 60 + s


T_JOB = at(22)  # the training job starts reading
T_PRESS = at(0, 4, 10, day=1)  # memory alert on the pressured target
T_BREAK = at(0, 6, 10.2, day=1)  # shared-dm broken pipe
T_OOB = at(0, 6, 12.0, day=1)  # out-of-bounds index
T_LOADER = at(0, 6, 13.4, day=1)  # the culprit's loader sees a truncated batch stream
T_COLL = at(0, 6, 14.0, day=1)  # the other ranks enter the BROADCAST the culprit never joins
T_RESTART = at(0, 21, 3, day=1)  # the pressured target restarts
T_DEATH = T_COLL + 1800.3  # watchdogs fire; the job dies; GET traffic stops
T_END = at(1, 15, day=1)  # `ais log get cluster` collects the logs


class WorkerJob(Job):
    """eval/synth/generate.py's Job with a date of our choosing on c10 lines (its helpers default to 1105)."""

    mmdd = "1105"

    def c10(self, rank, t, src, msg, sev="E", mmdd=None):  # noqa: D401 - same contract as Job.c10
        super().c10(rank, t, src, msg, sev, mmdd or self.mmdd)


@dataclass
class Scenario:
    seed: int = 0
    targets: int = 3
    proxies: int = 2
    ranks: int = 8
    ranks_per_node: int = 4
    culprit: int = 5
    pressured: int = 1  # index of the target under pressure
    worker_zone_min: int = -420
    node_skew_s: float = 0.0
    filler: int = 2  # ordinary INFO lines per stats period and daemon (scale knob)
    period: float = 180.0


class _Daemon:
    def __init__(self, sc: Scenario, rnd: random.Random, role: str, idx: int):
        self.sc, self.rnd, self.role, self.idx = sc, rnd, role, idx
        self.id = "".join(rnd.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz") for _ in range(4)) + \
            f"{rnd.randrange(1000, 9999)}"
        self.tag = f"{'t' if role == 'target' else 'p'}[{self.id}]"
        self.host = f"ais-{role}-{idx}"
        self.sname = f"ais{role}"
        self.pressured = role == "target" and idx == sc.pressured
        self.start = at(9, 10, 7 * idx + (40 if role == "proxy" else 0))
        self.rotate = at(20, 0, 3 + 11 * idx + (5 if role == "proxy" else 0))
        self.pids = [311 + 17 * idx + (100 if role == "proxy" else 0), 4171 + idx]
        self.files: list[tuple[str, float, float, list[tuple[float, str]]]] = []

    # cumulative counters as integrals of piecewise-constant rates, so partial intervals read true
    def value(self, name: str, t: float) -> int:
        t0 = T_RESTART if self.pressured and t >= T_RESTART else self.start
        scale = (1.0 if self.role == "target" else 0.4) * (1 + 0.05 * self.idx)
        phases = {  # (from, to, per-second rate)
            "get.n": [(self.start, at(21, 30), 0.35), (T_JOB, T_OOB, 0.7), (T_OOB, T_DEATH, 0.25)],
            "getbatch.n": [(T_JOB, T_OOB, 3.3)] if self.role == "target" else [],
            "getbatch.obj.n": [(T_JOB, T_OOB, 3.3 * 64)] if self.role == "target" else [],
            "get.size": [(self.start, at(21, 30), 0.35 * 2.1e6), (T_JOB, T_OOB, 0.7 * 2.1e6), (T_OOB, T_DEATH, 0.25 * 2.1e6)],
            "getbatch.throttle.ns": [(T_JOB, T_OOB, 2e4)] if self.role == "target" else [],
            "err.kalive.n": [(self.start, T_END, 1 / 5400)],
            "err.get.n": [(self.start, T_END, 1 / 3600)],
        }
        v = 0.0
        for a, b, r in phases.get(name, []):
            lo, hi = max(a, t0), min(b, t)
            if hi > lo:
                v += (hi - lo) * r * (scale if not name.startswith("err.") else 1)
        if self.pressured and t >= T_OOB and t0 < T_OOB:
            v += {"err.getbatch.n": 57, "err.http.write.n": 41, "err.get.n": 12, "getbatch.throttle.ns": 9.6e10}.get(name, 0)
        return int(v)

    def stats_line(self, t: float) -> str:
        names = ["err.get.n", "err.getbatch.n", "err.http.write.n", "err.kalive.n", "get.n", "get.size", "getbatch.n",
                 "getbatch.obj.n", "getbatch.throttle.ns"]
        kv = {n: self.value(n, t) for n in names}
        kv["kalive.ns"] = self.rnd.randrange(400_000, 900_000)
        kv["get.ns"] = self.rnd.randrange(1_000_000, 3_000_000) if T_JOB < t < T_DEATH else 0
        kv["state.flags"] = 8198 if self.pressured and T_PRESS <= t < T_RESTART else 0
        return "{" + ",".join(f"{k}:{v}" for k, v in sorted(kv.items()) if v) + "}"

    def active(self, t: float) -> bool:
        return self.start <= t < at(21, 30) or T_JOB <= t < T_DEATH + 900


def _daemon_lines(d: _Daemon, others: list[_Daemon], sc: Scenario) -> None:
    rnd = d.rnd
    bounds = [(d.start, d.rotate, "Started up", d.pids[0]), (d.rotate, T_RESTART if d.pressured else T_END, "Rotated",
                                                              d.pids[0])]
    if d.pressured:
        bounds.append((T_RESTART, T_END, "Started up", d.pids[1]))
    for k, (a, b, how, pid) in enumerate(bounds):
        lines: list[tuple[float, str]] = [
            (a, f"{how} at {(D0 + timedelta(seconds=a)).strftime('%Y/%m/%d %H:%M:%S')}, host {d.host}, go1.22.3 for linux/amd64"),
            (a + 1e-4, f"Node {d.tag}, Version 3.27.1.6b7de24, build 2025-08-01T09:00:00+0000, CPUs(64, runtime=64), container:k8s"),
            (a + 0.5, f"I {hms(a + 0.5)} common:494 {_rfc822(a)} UTC =============")]
        h = (int(a // 3600) + 1) * 3600
        while h < b:
            t = h + 3.1172
            lines.append((t, f"I {hms(t)} common:494 {_rfc822(t)} UTC ============="))
            h += 3600
        t = a + 20 + rnd.random() * 20
        while t < b:
            if d.active(t):
                lines.append((t, f"I {hms(t)} {d.stats_line(t)}"))
                for j in range(sc.filler):
                    u = t + (j + 1) * sc.period / (sc.filler + 1)
                    if u < b:
                        msg = (f"x-get-batch:298 x-get-batch[{rnd.randrange(16**8):08x}]-{BUCKET}: work item done, "
                               f"n=64, size={rnd.randrange(8, 16)}.{rnd.randrange(10)}MiB" if d.role == "target" else
                               f"prxclu:{rnd.randrange(100, 999)} redirect GET {BUCKET}/shard-{rnd.randrange(99999):05d}.tar")
                        lines.append((u, f"I {hms(u)} {msg}"))
            t += sc.period + rnd.uniform(-3, 3)
        if d.role == "proxy" and d.idx == 0 and k == 0:  # a stats line cut mid-write (disk full, crash): malformed
            u = at(11, 2, 2.100016)
            lines.append((u, f"I {hms(u)} {{err.get.n:1,get.n:12"))
        if d.pressured and a <= T_PRESS < b:
            _failure(d, others, lines, rnd)
        if d.role == "target" and not d.pressured and a <= T_OOB < b:  # a normal end of stream: not a break
            u = T_OOB + 95.5
            lines.append((u, f"I {hms(u)} transport:99 shared-dm[{d.tag}=>{others[0].tag}] terminated [end-of-stream ctx: close]"))
        lines.sort(key=lambda x: x[0])
        name = f"{d.sname}.{d.host}.INFO.{(D0 + timedelta(seconds=a)).strftime('%m%d-%H%M%S')}.{pid}"
        d.files.append((name, a, b, lines))


def _rfc822(t: float) -> str:
    return (D0 + timedelta(seconds=t)).strftime("%d %b %y %H:%M")


def _failure(d: _Daemon, others: list[_Daemon], lines: list, rnd: random.Random) -> None:
    peer = next(o for o in others if o.role == "target")
    xid = "Xf3kW9p0q"
    lines.append((T_PRESS, f"W {hms(T_PRESS)} common:811 {d.tag} mmsa alert: low memory"))
    u = T_PRESS + 50
    lines.append((u, f"W {hms(u)} gc:45 mmsa.{d.tag} free mem to OS(pressure,force,togc,load) [ 4 true 1.2GiB 37 ]"))
    t = T_PRESS + 20
    while t < at(0, 9, day=1):
        lines.append((t, f"W {hms(t)} moss:589 x-get-batch[{xid}] pending: {rnd.randrange(90, 140)} resource pressure: "
                         f"load=critical sleep=100ms [mem=critical dsk=critical] throttle: 100ms"))
        t += rnd.uniform(2, 5)
    lines.append((T_BREAK, f"E {hms(T_BREAK)} shared_dm:233 shared-dm: failed reconnecting to {peer.tag} (write: broken pipe "
                           f"--> dial tcp 10.1.2.{3 + peer.idx}:51081: i/o timeout) - closing/aborting..."))
    u = T_BREAK + 0.7
    lines.append((u, f"E {hms(u)} transport:99 shared-dm[{d.tag}=>{peer.tag}] terminated [write: broken pipe ctx: send]"))
    lines.append((T_OOB, f"E {hms(T_OOB)} moss:712 x-get-batch[{xid}] {d.tag} out-of-bounds index 17 (recv'd len=0, wid=\"{xid}\")"))
    for k in range(6):
        u = T_OOB + 0.4 + k * 1.3
        lines.append((u, f"W {hms(u)} shared_dm:301 shared-dm xid {xid} not found - dropping shard-{17 + k:06d}/utt-{40 + k}.flac"))
    for k in range(3):
        u = T_OOB + 60 + k * 45
        lines.append((u, f"E {hms(u)} moss:712 x-get-batch[{xid}{k}] {d.tag} out-of-bounds index {3 + k} "
                         f"(recv'd len=0, wid=\"{xid}{k}\")"))


def _workers(sc: Scenario, rnd: random.Random) -> WorkerJob:
    job = WorkerJob(ranks=sc.ranks, ranks_per_node=sc.ranks_per_node, job_id=JOB_ID, seed=sc.seed)

    def local(t: float, rank: int | None = None, node: int | None = None) -> datetime:
        n = node if node is not None else (rank // sc.ranks_per_node if rank is not None else 0)
        return D0 + timedelta(seconds=t + sc.worker_zone_min * 60 + (sc.node_skew_s if n == 1 else 0))

    job.mmdd = local(T_COLL).strftime("%m%d")
    job.startup()
    last = sc.ranks - 1
    t, it = T_JOB + 30, 1
    while t < T_COLL - 5:
        job.emit(last, f" [{local(t, last):%Y-%m-%d %H:%M:%S}] iteration {it * 10:8d}/  100000 | consumed samples: "
                       f"{it * 2560:12d} | elapsed time per iteration (ms): {7000 + rnd.random() * 40:.1f} | learning rate: "
                       f"1.499999E-04 | global batch size:   256 | lm loss: {6.5 - it * 0.001:.6E} | loss scale: 1.0 | "
                       f"grad norm: {1.2 + rnd.random():.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |")
        t, it = t + 60, it + 1
    noise = [r for r in (0, 2, 6) if r < sc.ranks and r != sc.culprit]
    for k, r in enumerate(noise):
        lt = local(at(23, 10 + 17 * k, 5.0), r)
        job.emit(r, f"W{lt:%m%d %H:%M:%S}.000000 {20000 + r} lhotse/dataset/sampling.py:88] GET {BUCKET}/shard-{r:05d}.tar "
                    f"failed, retrying 1/5: Connection reset by peer")
    c = sc.culprit
    job.emit(c, f"[NeMo W {local(T_LOADER, c):%Y-%m-%d %H:%M:%S} batch_loader:211] Batch stream truncated at index 17/64. "
                f"Falling back to direct AIStore API calls for remaining objects.")
    job.emit(c, f"[NeMo E {local(T_LOADER + 31, c):%Y-%m-%d %H:%M:%S} batch_loader:260] lhotse.ais.batch_loader."
                f"AISBatchLoaderError: Sequential GET fallback failed for shard-000017/utt-42.flac")
    seq = 4521
    others = [r for r in range(sc.ranks) if r != c]
    for r in others:
        job.waiting(r, seq, f"{local(T_DEATH - 2 + r % 2, r):%H:%M:%S}")
    job.notified(c, f"{local(T_DEATH - 1, c):%H:%M:%S}", enq=seq - 1, comp=seq - 1, by=others[0])
    for r in others:
        job.teardown([r], f"{local(T_DEATH, r):%H:%M:%S}")
    for n in range(job.nodes):
        first = n * sc.ranks_per_node
        job.emit_node(n, f"W{local(T_DEATH + 1, node=n):%m%d %H:%M:%S}.000000 {19000 + n} torch/distributed/elastic/"
                         f"multiprocessing/api.py:898] Sending process {20000 + first} closing signal SIGTERM")
        job.emit_node(n, f"srun: error: {job.node(first)}: tasks {first}-{first + sc.ranks_per_node - 1}: Exited with exit code 1")
    job.emit_node(0, f"slurmstepd: error: *** STEP {JOB_ID}.0 ON {job.node(0)} CANCELLED AT "
                     f"{local(T_DEATH + 2, node=0):%Y-%m-%dT%H:%M:%S} ***")
    return job


def _tar_gz(path: Path, files: list[tuple[str, bytes, float]]) -> None:
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tf:
        for name, data, mtime in files:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), int(mtime), 0o644
            tf.addfile(ti, io.BytesIO(data))
    path.write_bytes(raw.getvalue())


def generate(dest: Path | str, sc: Scenario | None = None, archives: bool = True) -> dict:
    """Write the bundle under `dest` (ais_logs/, workers/, truth.yaml); returns the truth."""
    sc = sc or Scenario()
    dest = Path(dest)
    rnd = random.Random(sc.seed)
    daemons = [_Daemon(sc, rnd, "target", i) for i in range(sc.targets)] + \
              [_Daemon(sc, rnd, "proxy", i) for i in range(sc.proxies)]
    ais = dest / "ais_logs"
    ais.mkdir(parents=True, exist_ok=True)
    for d in daemons:
        _daemon_lines(d, [o for o in daemons if o is not d], sc)
        members = [(name, ("\n".join(x for _, x in lines) + "\n").encode(), (D0 - datetime(1970, 1, 1)).total_seconds() + b)
                   for name, a, b, lines in d.files]
        if archives:
            _tar_gz(ais / f"{d.sname}-{d.id}.tar.gz", members)
        else:
            (ais / f"{d.sname}-{d.id}").mkdir(exist_ok=True)
            for name, data, _ in members:
                (ais / f"{d.sname}-{d.id}" / name).write_bytes(data)
    job = _workers(sc, rnd)
    write_case(dest / "workers", job, {})
    p = daemons[sc.pressured]
    iso = lambda t: (D0 + timedelta(seconds=t)).isoformat(timespec="seconds") + "+00:00"  # noqa: E731
    truth = {"pressured": [p.tag], "restart": {"daemon": p.tag, "at": iso(T_RESTART), "file": p.files[-1][0]},
             "midnight_files": [n for d in daemons for n, a, b, _ in d.files if a // 86400 != (b - 1) // 86400],
             "offset_s": -sc.worker_zone_min * 60, "worker_zone_min": sc.worker_zone_min,
             "culprit_rank": sc.culprit, "culprit_node": job.node(sc.culprit),
             "noise_ranks": [r for r in (0, 2, 6) if r < sc.ranks and r != sc.culprit],
             "jump": {"daemon": p.tag, "contains": iso(T_OOB)}, "loader_error": iso(T_LOADER), "death": iso(T_DEATH),
             "daemons": [d.tag for d in daemons], "node_skew_s": sc.node_skew_s, "seed": sc.seed}
    (dest / "truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False, width=120), encoding="utf-8")
    return truth


def main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m trainlog_debugger.eval.synth.ais", description=__doc__.splitlines()[0])
    ap.add_argument("dest")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--filler", type=int, default=2, help="ordinary INFO lines per stats period (scale)")
    ap.add_argument("--node-skew", type=float, default=0.0, help="worker node 1's clock ahead by this many seconds")
    ap.add_argument("--extracted", action="store_true", help="write folders instead of tar.gz archives")
    a = ap.parse_args(argv)
    truth = generate(a.dest, Scenario(seed=a.seed, filler=a.filler, node_skew_s=a.node_skew), archives=not a.extracted)
    print(f"wrote {a.dest}: ais_logs/ ({len(truth['daemons'])} daemons), workers/, truth.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

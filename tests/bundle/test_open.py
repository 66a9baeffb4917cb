"""open_bundle() on the layouts users really hand over: folders, tar/tgz/zip, single .gz files,
several paths, and `ais log get cluster` output (a folder of per-node tar.gz holding flat logs)."""
import bz2
import gzip
import hashlib
import io
import lzma
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from trainlog_debugger.tools.bundle.open import Bundle, open_bundle
from trainlog_debugger.tools.bundle.source import Source, natural_key

RANK = "[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout\n"
AIS = ("Started up at 2025/08/21 19:17:52, host {host}, go1.24.5 for linux/amd64\n"
       "Node {role}[XfTkbKqW], Version 1.5.0.6b7de24, build 2025-08-20T10:00:00+0000, CPUs(64, runtime=64)\n"
       "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical\n")


def write(p: Path, text: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "job"
    for r in (0, 2, 10):
        write(d / "node1" / f"rank_{r}.log", RANK.format(r=r) * 3)
    write(d / "node0" / "deep" / "er" / "dmesg.txt", "[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n")
    write(d / "slurm-4891784.out", "srun: error: node1: task 3: Killed\n")
    write(d / ".git" / "config", "[core]\n")                    # VCS dirs are not evidence
    return d


def rels(b: Bundle) -> list[str]:
    return [s.rel for s in b.sources]


def read(s: Source) -> bytes:
    with s.open() as f:
        return f.read()


def make_tar(path: Path, src: Path, mode: str) -> Path:
    with tarfile.open(path, mode) as tf:
        tf.add(src, arcname=src.name)
    return path


def test_directory_nested_and_natural_sort(logdir):
    with open_bundle(logdir) as b:
        assert rels(b) == ["node0/deep/er/dmesg.txt", "node1/rank_0.log", "node1/rank_2.log",
                           "node1/rank_10.log", "slurm-4891784.out"]
        kinds = {s.rel: s.kind for s in b.sources}
        assert kinds["node0/deep/er/dmesg.txt"] == "kernel" and kinds["slurm-4891784.out"] == "slurm"
        assert kinds["node1/rank_10.log"] == "rank_log"
        s = b.sources[1]
        assert s.path == logdir / "node1" / "rank_0.log" and not s.gzip       # read in place
        assert s.size == s.path.stat().st_size and read(s).startswith(b"[rank0]:")
        assert b.tmpdir is None and b.root == str(logdir) and b.skipped == [] and b.notes == []


@pytest.mark.parametrize("name,mode", [("logs.tar", "w"), ("logs.tar.gz", "w:gz"), ("logs.tgz", "w:gz"),
                                       ("logs.tar.bz2", "w:bz2"), ("logs.tar.xz", "w:xz")])
def test_tar_flavours(tmp_path, logdir, name, mode):
    arc = make_tar(tmp_path / name, logdir, mode)
    with open_bundle(arc) as b:
        assert rels(b) == [f"{name}!job/node0/deep/er/dmesg.txt", f"{name}!job/node1/rank_0.log",
                           f"{name}!job/node1/rank_2.log", f"{name}!job/node1/rank_10.log",
                           f"{name}!job/slurm-4891784.out"]
        s = b.sources[3]
        assert s.kind == "rank_log" and read(s) == (RANK.format(r=10) * 3).encode()
        assert b.tmpdir in s.path.parents and s.size == len(read(s))


def test_zip(tmp_path, logdir):
    arc = tmp_path / "logs.zip"
    with zipfile.ZipFile(arc, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(logdir.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(logdir).as_posix())
    with open_bundle(arc) as b:
        assert rels(b) == ["logs.zip!node0/deep/er/dmesg.txt", "logs.zip!node1/rank_0.log",
                           "logs.zip!node1/rank_2.log", "logs.zip!node1/rank_10.log",
                           "logs.zip!slurm-4891784.out"]
        assert b.skipped == []                                       # .git/ inside archives: ignored


def test_single_gz_read_in_place(tmp_path):
    gz = write(tmp_path / "rank_3.log.gz", gzip.compress((RANK.format(r=3) * 100).encode()))
    with open_bundle(gz) as b:
        (s,) = b.sources
        assert (s.rel, s.kind, s.gzip, s.path, s.size) == ("rank_3.log.gz", "rank_log", True, gz, gz.stat().st_size)
        assert read(s) == (RANK.format(r=3) * 100).encode() and b.tmpdir is None


def test_single_plain_file(tmp_path):
    f = write(tmp_path / "sub" / "combined.log", "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    with open_bundle(str(f)) as b:
        assert [(s.rel, s.kind, s.path) for s in b.sources] == [("combined.log", "generic", f)]


def test_multiple_paths(tmp_path, logdir):
    f = write(tmp_path / "extra" / "dmesg", "[ 1.000000] hello\n")
    tgz = make_tar(tmp_path / "more.tgz", logdir / "node1", "w:gz")
    with open_bundle([logdir, f, tgz]) as b:
        assert rels(b)[:2] == ["dmesg", "job/node0/deep/er/dmesg.txt"]
        assert "more.tgz!node1/rank_10.log" in rels(b) and "job/slurm-4891784.out" in rels(b)
        assert len(b.sources) == 1 + 5 + 3


def _ais_node_tar(path: Path, role: str, host: str, stamps: list[str]) -> None:
    """One `aistarget-<ID>.tar.gz`: flat, every rotation of the node's INFO log (one gzipped)."""
    with tarfile.open(path, "w:gz") as tf:
        for i, stamp in enumerate(stamps):
            name = f"ais{'target' if role == 't' else 'proxy'}.{host}.INFO.{stamp}.4171"
            data = AIS.format(host=host, role=role).encode()
            if i == 1:
                name, data = name + ".gz", gzip.compress(data)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_ais_log_get_cluster_layout(tmp_path):
    out = tmp_path / "aislogs-123"
    out.mkdir()
    _ais_node_tar(out / "aistarget-XfTkbKqW.tar.gz", "t", "ais-target-3", ["0821-191752", "0822-000001"])
    _ais_node_tar(out / "aistarget-Ab12.tar.gz", "t", "ais-target", ["0821-191750"])
    _ais_node_tar(out / "aisproxy-PpQq.tar.gz", "p", "ais-proxy-0", ["0821-191700"])
    with open_bundle(out) as b:
        assert rels(b) == [
            "aisproxy-PpQq.tar.gz!aisproxy.ais-proxy-0.INFO.0821-191700.4171",
            "aistarget-Ab12.tar.gz!aistarget.ais-target.INFO.0821-191750.4171",
            "aistarget-XfTkbKqW.tar.gz!aistarget.ais-target-3.INFO.0821-191752.4171",
            "aistarget-XfTkbKqW.tar.gz!aistarget.ais-target-3.INFO.0822-000001.4171.gz"]
        assert [s.kind for s in b.sources] == ["ais_proxy", "ais_target", "ais_target", "ais_target"]
        gz = b.sources[-1]
        assert gz.gzip and read(gz).startswith(b"Started up at 2025/08/21")
        assert not any(p.name.endswith(".tar.gz") for p in b.tmpdir.iterdir())   # expanded copies dropped


def test_ais_node_dir_symlinks_not_double_counted(tmp_path):
    d = tmp_path / "ais"
    real = write(d / "aistarget.ais-target-3.INFO.0821-191752.4171", AIS.format(host="ais-target-3", role="t"))
    (d / "aistarget.INFO").symlink_to(real.name)                    # nlog's "current file" link
    (d / "alias").symlink_to(d)                                     # dir link inside the root: not walked twice
    with open_bundle(d) as b:
        assert rels(b) == [real.name] and b.skipped == []


def test_nested_archives_rel_with_bang(tmp_path):
    inner_zip = io.BytesIO()
    with zipfile.ZipFile(inner_zip, "w") as zf:
        zf.writestr("x/rank_1.log.gz", gzip.compress(RANK.format(r=1).encode()))
        zf.writestr("plain.txt", "hello\n")
    outer = tmp_path / "a.tar.gz"
    with tarfile.open(outer, "w:gz") as tf:
        info = tarfile.TarInfo("b/c.zip")
        info.size = len(inner_zip.getvalue())
        tf.addfile(info, io.BytesIO(inner_zip.getvalue()))
    with open_bundle(outer) as b:
        assert rels(b) == ["a.tar.gz!b/c.zip!plain.txt", "a.tar.gz!b/c.zip!x/rank_1.log.gz"]
        assert b.sources[1].gzip and read(b.sources[1]) == RANK.format(r=1).encode()


def test_single_bz2_xz_and_zip_gz(tmp_path):
    d = tmp_path / "in"
    write(d / "dmesg.txt.xz", lzma.compress(b"[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n"))
    write(d / "rank_1.log.bz2", bz2.compress(RANK.format(r=1).encode()))
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("rank_2.log", RANK.format(r=2))
    write(d / "more.zip.gz", gzip.compress(z.getvalue()))
    with open_bundle(d) as b:
        assert [(s.rel, s.kind, s.gzip) for s in b.sources] == [
            ("dmesg.txt.xz", "kernel", False), ("more.zip.gz!rank_2.log", "rank_log", False),
            ("rank_1.log.bz2", "rank_log", False)]
        assert read(b.sources[2]) == RANK.format(r=1).encode() and b.tmpdir in b.sources[2].path.parents


def test_temp_dir_removed_on_close(tmp_path, logdir):
    arc = make_tar(tmp_path / "logs.tgz", logdir, "w:gz")
    b = open_bundle(arc)
    tmp = b.tmpdir
    assert tmp.is_dir() and all(tmp in s.path.parents for s in b.sources)
    b.close()
    assert not tmp.exists()
    b.close()                                                       # idempotent
    with open_bundle(arc) as b2:
        tmp2 = b2.tmpdir
    assert not tmp2.exists()


def _snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns, p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_inputs_unmodified(tmp_path, logdir):
    make_tar(tmp_path / "logs.tgz", logdir, "w:gz")
    write(tmp_path / "r.log.gz", gzip.compress(b"hello\n"))
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as zf:
        zf.writestr("rank_0.log", RANK.format(r=0))
    before = _snapshot(tmp_path)
    dir_mtimes = {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_dir()}
    with open_bundle(tmp_path) as b:
        for s in b.sources:
            read(s)
        assert len(b.sources) == 5 + 5 + 1 + 1
    assert _snapshot(tmp_path) == before
    assert {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_dir()} == dir_mtimes


def test_natural_key():
    names = ["rank_10.log", "rank_2.log", "Rank_1.log", "a.tgz!r3", "a.tgz!r20"]
    assert sorted(names, key=natural_key) == ["a.tgz!r3", "a.tgz!r20", "Rank_1.log", "rank_2.log", "rank_10.log"]


def test_empty_file_kept_but_not_enough(tmp_path):
    write(tmp_path / "d" / "rank_5.log", "")
    write(tmp_path / "d" / "rank_6.log", "ok\n")
    with open_bundle(tmp_path / "d") as b:                          # an empty rank log is evidence too
        assert [(s.rel, s.size) for s in b.sources] == [("rank_5.log", 0), ("rank_6.log", 3)]


def test_real_incidents_open():
    root = Path(__file__).resolve().parents[3] / "shared" / "incidents"
    if not root.is_dir():
        pytest.skip("no shared incidents")
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        with open_bundle(d) as b:
            assert b.sources, d
            assert [x.rel for x in b.skipped] == ["truth.yaml"], d  # the case's answer is never read as a log
            kinds = {os.path.basename(s.rel): s.kind for s in b.sources}
            assert kinds.get("rank5.log", "rank_log") == "rank_log"
            assert kinds.get("torchelastic_summary.log", "torchrun") == "torchrun"


def test_tar_header_precheck_turns_down_only_what_tarfile_turns_down(tmp_path):
    """open's quick look at a header's checksum field must never turn down a header tarfile accepts: real headers
    of every format, and fields that int(s, 8) reads in odd spellings (signs, spaces, underscores, 0o, base-256)."""
    import io
    from trainlog_debugger.tools.bundle.archives import _looks_tar

    def by_tarfile(block: bytes) -> bool:
        try:
            return len(block) >= 512 and bool(tarfile.TarInfo.frombuf(block[:512], "utf-8", "surrogateescape"))
        except tarfile.HeaderError:
            return False

    heads = []
    for fmt in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
            data = b"[rank0]: hello\n"
            ti = tarfile.TarInfo("logs/rank0.log")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        heads.append(buf.getvalue()[:512])
    assert all(_looks_tar(h) for h in heads)
    base = heads[0]
    for field in (b" 1234 \x00 ", b"+0o1234\x00", b"-1_2_3\x00 ", b"\x80\x00\x00\x00\x00\x00\x12\x34", b"\x00" * 8,
                  b"12:34:56", b"[rank0]:", b"INFO 123", b"0000000\xff"):
        block = base[:148] + field + base[156:]
        assert _looks_tar(block) == by_tarfile(block), field
    calc = tarfile.calc_chksums(base)[0]
    for spelled in (f"+0o{calc:o}", f" {calc:o}_"[:-1] + "\x00", f"{calc:07o}\x00"):
        block = base[:148] + spelled.encode()[:8].ljust(8, b" ") + base[156:]
        assert by_tarfile(block) and _looks_tar(block), spelled
    log = (b"[rank3]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
           b"operation timeout: WorkNCCL(SeqNum=5231, OpType=ALLREDUCE) ran for 600000 milliseconds\n") * 8
    assert not _looks_tar(log) and not by_tarfile(log)


def _mixed_dir(root: Path, n: int) -> None:
    """n rank logs of three producers, with what the walk refuses or reads itself mixed in: program source, a
    binary, a gzip, a NUL-run (copytruncate) log, a UTF-16 log, a case label, a link, an empty file."""
    root.mkdir()
    for r in range(n):
        d = root / f"node{r // 8:03d}"
        d.mkdir(exist_ok=True)
        body = (f"[rank{r}]:[E1105 03:13:52.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600000 milliseconds\n"
                if r % 3 == 0 else f"2024-11-05 03:13:5{r % 10} INFO step {r} loss 2.{r}\n" if r % 3 == 1 else
                f"{r}: srun: error: node{r}: task {r}: Exited with exit code 1\n")
        (d / f"rank_{r}.log").write_text(body * 3)
    (root / "node000" / "train.py").write_text('raise RuntimeError("NCCL error")\n')
    (root / "node000" / "blob.bin").write_bytes(bytes(range(256)) * 40)
    (root / "node001" / "old.log.gz").write_bytes(gzip.compress(b"RuntimeError: CUDA error: out of memory\n"))
    (root / "node001" / "truncated.log").write_bytes(b"\x00" * 4096 + b"CUDA error: an illegal memory access\n")
    (root / "node002" / "win.log").write_bytes("error: NCCL timeout\r\n".encode("utf-16"))
    (root / "node002" / "truth.yaml").write_text("category: oom\n")
    (root / "node002" / "empty.log").write_text("")
    os.symlink(root / "node003" / "rank_24.log", root / "node003" / "again.log")


def test_a_big_directory_sniffed_by_workers_opens_as_one_process_opens_it(tmp_path, monkeypatch):
    """Issue 28: a directory of ≥ PRECLASSIFY_MIN_FILES files is read and sniffed by forked workers; the walk must
    give the same sources (order, kinds, sizes, flags) and the same refusals as when it reads every file itself."""
    from trainlog_debugger.tools.bundle import walk
    _mixed_dir(tmp_path / "logs", 1100)

    def index(root):
        with open_bundle(root) as b:
            return ([(s.rel, s.kind, s.size, s.gzip, s.nul, s.utf16, s.ident) for s in b.sources],
                    [(s.rel, s.reason) for s in b.skipped])

    listing = [(d, dirs, files) for d, dirs, files in os.walk(tmp_path / "logs")]
    pre = walk._preclassify_dir(listing, lambda p: os.path.relpath(p, tmp_path / "logs"),
                                os.path.realpath(tmp_path / "logs"), 10_000)
    assert len(pre) >= 1100 and not any("truncated" in k or k.endswith((".gz", "win.log")) for k in pre)
    parallel = index(tmp_path / "logs")
    monkeypatch.setattr(walk, "PRECLASSIFY_MIN_FILES", 10**9)
    serial = index(tmp_path / "logs")
    assert parallel == serial
    kinds = {k for _r, k, *_ in serial[0]}
    assert len(serial[0]) >= 1100 and len(kinds) >= 2
    assert {r for r, _ in serial[1]} >= {"node000/train.py", "node000/blob.bin", "node002/truth.yaml"}

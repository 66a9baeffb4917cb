"""Issue 15, part A: files that change under us, links swapped in, evidence that must not be dropped, non-UTF-8
names, signals and stale temp dirs. Inputs are built here, in the real formats (PyTorch/NCCL log lines)."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from harness import assert_clean, run_cli, snapshot, write_tar

from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.open import clean_stale_tmpdirs, open_bundle

WATCHDOG = ("[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600012 milliseconds before timing out.\n")


def rank_log(r: int, steps: int = 3) -> bytes:
    return (b"".join(f"[rank{r}]:I1105 12:30:0{i}.000000 1 train.py:88] step {i} loss 2.5\n".encode()
                     for i in range(steps)) + WATCHDOG.format(r=r).encode())


def read_all(src) -> bytes:
    with src.open() as f:
        return f.read()


def test_growing_file_is_read_to_its_size_at_open_and_marked(tmp_path):
    f = tmp_path / "rank_0.log"
    f.write_bytes(rank_log(0))
    size = f.stat().st_size
    with open_bundle(tmp_path) as b:
        with f.open("ab") as w:
            w.write(b"[rank0]:I1105 12:40:00.000000 1 train.py:88] written after the bundle was opened\n")
        assert read_all(b.sources[0]) == rank_log(0)
        assert b.notes == [f"rank_0.log: still growing: read to its size when opened ({size:,} bytes; "
                           f"now {f.stat().st_size:,})"]


@pytest.mark.slow
def test_a_writer_that_never_stops_does_not_hang_ask(tmp_path, cli_env):
    f = tmp_path / "rank_0.log"
    f.write_bytes(rank_log(0))
    writer = subprocess.Popen(["sh", "-c", f"while :; do echo 'step loss 2.5' >> '{f}'; done"])
    try:
        res = run_cli(["ask", str(tmp_path)], env=cli_env, timeout=60)
    finally:
        writer.kill()
        writer.wait()
    assert_clean(res, rc_in=(0,), max_s=40)


def test_file_swapped_for_a_symlink_after_indexing_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"TOP SECRET outside the bundle\n")
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(rank_log(0))
    (d / "rank_1.log").write_bytes(rank_log(1))
    with open_bundle(d) as b:
        (d / "rank_1.log").unlink()
        (d / "rank_1.log").symlink_to(secret)
        with pytest.raises(READ_ERRORS) as ei:
            read_all(b.sources[1])
        assert read_error_reason(ei.value) == "replaced by a symlink after the bundle was indexed: not followed"
        assert [(s.rel, s.reason) for s in b.skipped] == [
            ("rank_1.log", "replaced by a symlink after the bundle was indexed: not followed")]
        (d / "new.tmp").write_bytes(b"another file, another inode\n")
        os.replace(d / "new.tmp", d / "rank_1.log")
        with pytest.raises(READ_ERRORS) as ei:
            read_all(b.sources[1])
        assert "replaced by another file" in read_error_reason(ei.value)
        assert read_all(b.sources[0]) == rank_log(0)


def test_nul_runs_of_copytruncate_are_skipped_not_the_file(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(b"\x00" * 20000 + rank_log(0))          # longer than the sniffed head
    (d / "rank_1.log").write_bytes(rank_log(1)[:60] + b"\x00" * 500 + rank_log(1)[60:])
    (d / "model.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    with open_bundle(d) as b:
        got = {s.rel: read_all(s) for s in b.sources}
        assert got == {"rank_0.log": rank_log(0), "rank_1.log": rank_log(1)}
        assert [s.rel for s in b.skipped] == ["model.bin"]
    (d / "rank_0.log").write_bytes(b"\x00" * 30000)
    with open_bundle(d) as b:
        assert ("rank_0.log", "only NUL bytes (an emptied log file)") in [(s.rel, s.reason) for s in b.skipped]


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_tar_cut_inside_a_header_keeps_earlier_members_and_says_where(tmp_path):
    logs = [(f"rank_{i}.log", rank_log(i)) for i in range(3)]
    whole = _tar(logs)
    third = whole.index(b"rank_2.log")          # the third member's header starts here
    (tmp_path / "cut.tar").write_bytes(whole[: third + 300])
    with open_bundle(tmp_path / "cut.tar") as b:
        assert [s.rel for s in b.sources] == ["cut.tar!rank_0.log", "cut.tar!rank_1.log"]
        (skip,) = b.skipped
        assert skip.rel == "cut.tar!*"
        assert skip.reason.startswith(f"tar stops at byte {third:,} after member rank_1.log")


def test_tar_member_cut_short_is_read_as_far_as_it_goes(tmp_path):
    big = rank_log(1, steps=400)
    whole = _tar([("rank_0.log", rank_log(0)), ("rank_1.log", big)])
    start = whole.index(b"[rank1]")
    (tmp_path / "cut.tar").write_bytes(whole[: start + len(big) // 2])
    with open_bundle(tmp_path / "cut.tar") as b:
        assert [s.rel for s in b.sources] == ["cut.tar!rank_0.log", "cut.tar!rank_1.log"]
        assert read_all(b.sources[1]) == big[: len(big) // 2]
        assert any(n.startswith("cut.tar!rank_1.log: ") and "partial" in n for n in b.notes), b.notes


def test_non_utf8_file_names_keep_json_valid(tmp_path, cli_env):
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(rank_log(0))
    os.close(os.open(os.path.join(os.fsencode(d), b"rank_1-\xff\xfe.log"), os.O_CREAT | os.O_WRONLY))
    with open(os.path.join(os.fsencode(d), b"rank_1-\xff\xfe.log"), "wb") as f:
        f.write(rank_log(1))
    res = run_cli(["scan", "--json", str(d)], env=cli_env)
    assert_clean(res, rc_in=(0,))
    files = {n for g in json.loads(res.stdout)["file_groups"] for n in g["exemplars"]}  # a group names its first, last
    assert files == {"rank_0.log", "rank_1-\\xff\\xfe.log"}


@pytest.mark.slow
def test_sigterm_and_sighup_remove_the_temp_dir(tmp_path, cli_env):
    t = tmp_path / "many.tar.gz"
    write_tar(t, ((f"logs/rank_{i}.log", rank_log(i)) for i in range(4000)))
    before = snapshot(t)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        def hit(popen, sig=sig):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(Path(popen.tmpdir).glob("trainlog-bundle-*/0*")):
                time.sleep(0.02)
            popen.send_signal(sig)
        res = run_cli(["ask", str(t)], env=dict(cli_env, DEBUGGER_MAX_FILES="100000"), on_start=hit)
        assert_clean(res, rc_in=(128 + sig,), max_s=40)
        assert res.stderr[-1] == f"error: terminated by {sig.name}; temporary files removed"
    assert snapshot(t) == before


def test_stale_temp_dirs_of_killed_runs_are_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    made = {}
    for label, pid, owner in (("dead", dead.pid, f"{host} {dead.pid}"), ("alive", os.getpid(), f"{host} {os.getpid()}"),
                              ("other-host", dead.pid, f"not-{host} {dead.pid}"), ("no-marker", dead.pid, None)):
        p = tmp_path / f"trainlog-bundle-{pid}-{label}"
        p.mkdir()
        (p / "000001-rank_0.log").write_bytes(b"x\n")
        if owner:
            (p / ".owner").write_text(owner + "\n")
        made[label] = p
    (tmp_path / "unrelated-dir").mkdir()
    assert clean_stale_tmpdirs(str(tmp_path)) == [str(made["dead"])]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["unrelated-dir"] + [made[k].name for k in ("alive", "other-host", "no-marker")])


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory):
    """~135 MB over 32 rank files: a parallel scan in forked workers (over PARALLEL_MIN_BYTES, several batches), half
    a minute with the pure-Python engine on 2 cores."""
    d = tmp_path_factory.mktemp("big")
    block = "".join(f"[rank{{r}}]: iteration {i} | loss 2.3{i % 10} | elapsed time per iteration (ms): 812.{i % 10} "
                    f"| NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC retrying 1/5\n" for i in range(2000))
    for r in range(32):
        b = block.replace("{r}", str(r)).encode()
        with open(d / f"rank_{r}.log", "wb") as f:
            for _ in range(int(4e6 // len(b)) + 1):
                f.write(b)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("sig, group", [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, True)],
                         ids=["SIGTERM-pid", "SIGHUP-pid", "SIGINT-group"])
def test_a_signal_stops_a_parallel_scan_now(big_bundle, cli_env, sig, group):
    """Issue 30: Ctrl-C, and SIGTERM or SIGHUP to the PID only, were honoured after every queued batch ran (the
    executor's exit waited for them), and then the exit waited on the workers' queue forever."""
    def hit(popen):
        time.sleep(3)  # the workers are forked and busy
        hit.at = time.monotonic()
        os.killpg(popen.pid, sig) if group else popen.send_signal(sig)

    res = run_cli(["scan", "--json", str(big_bundle)], env=dict(cli_env, DEBUGGER_ENGINE="re"), on_start=hit,
                  timeout=120, new_session=group)
    assert res.rc == 128 + sig, (res.rc, res.stderr)
    assert time.monotonic() - hit.at < 15, "the scan went on after the signal"
    assert not res.tmp_left, res.tmp_left


def _swapped_walk(monkeypatch, root: Path, outside: Path):
    """os.walk as it goes when `root/ranks` is swapped for a symlink to `outside` after the walk listed it as a
    directory and before it reads what is inside: the next step lists the symlink's target (the race of issue 30,
    made deterministic)."""
    from trainlog_debugger.tools.bundle import walk as W
    real_walk = os.walk

    def walk(top, *a, **kw):
        for d, dirs, files in real_walk(top, *a, **kw):
            if Path(d) != root:
                continue
            yield d, dirs, files
            # os.walk checked `ranks` was no link and is about to list it: the swap lands in between
            (root / "ranks").rename(root / "ranks.orig")
            (root / "ranks").symlink_to(outside, target_is_directory=True)
            yield os.path.join(d, "ranks"), [], sorted(os.listdir(root / "ranks"))
            return
    monkeypatch.setattr(W.os, "walk", walk)


def test_a_directory_swapped_for_a_symlink_mid_walk_is_not_read(tmp_path, monkeypatch):
    """Issue 30: O_NOFOLLOW protects the last component only; a DIRECTORY swapped for a symlink after the walk
    decided to descend made the tool read and report files outside the bundle (10/10 scan, 5/5 ask)."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "rank_0.log").write_text("[rank0]: OUTSIDE-SECRET RuntimeError: CUDA error: an illegal memory access\n")
    root = tmp_path / "bundle"
    (root / "ranks").mkdir(parents=True)
    (root / "ranks" / "rank_0.log").write_text("[rank0]: iteration 10 | loss 2.31\n")
    (root / "launcher.log").write_text("[rank1]: iteration 10 | loss 2.30\n")
    _swapped_walk(monkeypatch, root, outside)
    with open_bundle(root) as b:
        assert all("OUTSIDE" not in s.open().read().decode() for s in b.sources)
        refused = [s for s in b.skipped if s.rel == "ranks/rank_0.log"]
        assert refused and "outside the bundle" in refused[0].reason, b.skipped


def test_a_file_opened_through_a_swapped_directory_is_refused_at_read_time(tmp_path):
    """The same swap after the walk: a worker opening the indexed path reads where the descriptor really is."""
    from trainlog_debugger.tools.bundle.source import ReadRefused
    root = tmp_path / "bundle"
    (root / "ranks").mkdir(parents=True)
    (root / "ranks" / "rank_0.log").write_text("[rank0]: iteration 10 | loss 2.31\n")
    with open_bundle(root) as b:
        src = b.sources[0]
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (outside / "rank_0.log").write_text("[rank0]: OUTSIDE\n")
        (root / "ranks").rename(root / "ranks.orig")
        (root / "ranks").symlink_to(outside, target_is_directory=True)
        src.ident = None  # even with the inode check out of the way, the directory check stands
        with pytest.raises(ReadRefused, match="outside the bundle"):
            src.open()


def test_a_cut_gzip_gives_the_lines_before_the_break(tmp_path):
    """Issue 30: a small truncated .gz read 0 lines and still said "partial"."""
    import gzip as gz
    from trainlog_debugger.tools.scan.driver import scan_bundle
    data = "".join(f"[rank0]: iteration {i} | loss 2.3{i % 10}\n" for i in range(3000)).encode()
    z = gz.compress(data)
    (tmp_path / "rank_0.log.gz").write_bytes(z[: len(z) * 2 // 3])
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b)
    f = res.files[0]
    assert f.error == "truncated gzip" and f.lines > 500, (f.lines, f.notes)
    assert any(n.startswith("read stopped at byte ") and "truncated gzip" in n for n in f.notes)


def test_small_oddities_are_read_and_said_rightly(tmp_path):
    """Issue 30: a 24-byte file with no final newline was noted as "longer than 64 MiB"; one NUL in the first 8 KiB
    dropped a file as binary; UTF-16 was refused ("binary" without a byte-order mark); a NaN went into JSON bare."""
    from trainlog_debugger.tools.jsonable import dumps
    from trainlog_debugger.tools.scan.driver import scan_bundle
    (tmp_path / "a.log").write_bytes(b"[rank0]: RuntimeError: x")
    (tmp_path / "b.log").write_bytes(b"[rank1]: iteration 3 loss 2.3\n[rank1]: RuntimeError: CUDA error\x00 here\n")
    (tmp_path / "c.log").write_bytes(("iteration 1 loss 2.3 on rank 0\n" * 20).encode("utf-16-le"))
    (tmp_path / "d.log").write_bytes("[rank2]: RuntimeError: CUDA error: device-side assert\n".encode("utf-16"))
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b)
        assert sorted(s.rel for s in b.sources) == ["a.log", "b.log", "c.log", "d.log"] and not b.skipped
    assert not any("longer than" in n for f in res.files for n in f.notes)
    assert {f.rel: f.lines for f in res.files} == {"a.log": 1, "b.log": 2, "c.log": 20, "d.log": 1}
    assert 2 in res.ranks and any(p.id == "cuda.error" for p in res.patterns)  # UTF-16 read decoded, BOM or not
    with open_bundle(tmp_path) as b:
        text = next(s for s in b.sources if s.rel == "b.log").open().read().decode()
    assert "CUDA error␀ here" in text  # a stray NUL is read and shown
    assert dumps({"t": float("nan"), "u": [float("inf")]}, indent=None) == '{"t": null, "u": [null]}'


def test_stdin_that_is_no_log_is_refused_after_its_first_mib(tmp_path, cli_env):
    """Issue 30: stdin `-` wrote up to 8 GiB before refusing."""
    import base64
    noise = base64.b64encode(os.urandom(3 << 20))
    res = run_cli(["ask", "--offline", "-"], env=cli_env, stdin=noise, timeout=60)
    assert res.rc == 2 and res.stderr[-1] == "error: no training-job log in the first MiB of stdin: nothing copied further"
    assert not res.tmp_left, res.tmp_left


def test_a_killed_stdin_copy_is_swept_by_the_next_run(tmp_path):
    """Issue 30: the temp of a run killed while it copied stdin was never removed."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "trainlog_debugger", "ask", "--offline", "-"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p.stdin.write(b"[rank0]: iteration 1 loss 2.3\n" * 1000)
    p.stdin.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not list(tmp_path.glob("trainlog-bundle-*stdin*")):
        time.sleep(0.05)
    assert list(tmp_path.glob("trainlog-bundle-*stdin*")), "no stdin temp was made"
    p.kill()
    p.wait(10)
    assert clean_stale_tmpdirs(str(tmp_path)) and not list(tmp_path.glob("trainlog-bundle-*"))


def test_many_stray_nuls_and_a_run_across_a_read_boundary(tmp_path):
    """A file with a stray NUL on every line grows as it is shown (␀ is three bytes): `ask /usr/share/doc` ended in
    'memoryview assignment' when one read's output outgrew the caller's buffer. A NUL run cut by a read boundary
    still goes as a run, not as sixteen ␀."""
    from trainlog_debugger.tools.scan.driver import scan_bundle
    line = b"[rank0]: iteration 7 loss 2.3\n" * 40 + b"[rank0]: iteration 8 loss 2.3\x00\n"
    body = line * 500  # ~620 KiB, 500 stray NULs (under one per KiB: text, not binary), ~50 in each 64 KiB read
    cut = (1 << 16) - 8  # a 64-NUL run that straddles the first 64 KiB read
    data = body[:cut] + b"\x00" * 64 + body[cut:] + b"[rank0]: RuntimeError: CUDA error: an illegal memory access\n"
    (tmp_path / "rank_0.log").write_bytes(data)
    with open_bundle(tmp_path) as b:
        text = b.sources[0].open().read()
        res = scan_bundle(b)
    want = (body[:cut] + body[cut:]).replace(b"\x00", "␀".encode()) + data[len(body) + 64:]
    assert text == want
    assert res.files[0].lines == 20501 and any(p.id == "cuda.error" for p in res.patterns)

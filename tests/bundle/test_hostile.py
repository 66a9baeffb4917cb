"""open_bundle() on inputs built to hurt: path traversal, links, bombs, truncation, binaries,
malicious pickles. Everything is built in tmp_path; the process temp dir is redirected too, so we
can prove nothing was written anywhere else and every extraction dir is gone after close()."""
import bz2
import gzip
import io
import os
import pickle
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

import trainlog_debugger.tools.bundle.walk as walk
from trainlog_debugger.tools.bundle.source import READ_ERRORS, read_error_reason
from trainlog_debugger.tools.bundle.open import BundleError, open_bundle

LOG = b"[rank0]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout\n"


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Extraction dirs land in tmp_path/systmp; it must be empty again after every close()."""
    d = tmp_path / "systmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    yield d
    assert list(d.iterdir()) == []


def outside_files(tmp_path: Path) -> set[str]:
    """Every path under the parent of tmp_path except our extraction dir: must not grow."""
    return {str(p) for p in tmp_path.parent.rglob("*") if "systmp" not in p.parts}


def add(tf: tarfile.TarFile, name: str, data: bytes = b"", **kw) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tf.addfile(info, io.BytesIO(data) if data else None)


def reasons(b) -> dict[str, str]:
    return {s.rel: s.reason for s in b.skipped}


def test_tar_traversal_abs_and_links(tmp_path):
    evil = tmp_path / "evil.tar"
    abs_target = tmp_path.parent / "x_abs"
    with tarfile.open(evil, "w", format=tarfile.GNU_FORMAT) as tf:
        add(tf, "ok/rank_0.log", LOG)
        add(tf, "../x", b"pwned\n")
        add(tf, "ok/../../x", b"pwned\n")
        add(tf, str(abs_target), b"pwned\n")
        add(tf, "ok/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add(tf, "ok/hard", type=tarfile.LNKTYPE, linkname="ok/rank_0.log")
        add(tf, "ok/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        add(tf, "ok/fifo", type=tarfile.FIFOTYPE)
    before = outside_files(tmp_path)
    with open_bundle(evil) as b:
        assert [s.rel for s in b.sources] == ["evil.tar!ok/rank_0.log"]
        r = reasons(b)
        assert r["evil.tar!../x"] == "unsafe archive member path ../x"
        assert r["evil.tar!ok/../../x"].startswith("unsafe archive member path")
        assert r[f"evil.tar!{str(abs_target).lstrip('/')}"].startswith("unsafe archive member path /")
        assert r["evil.tar!ok/link"] == "symlink member (not extracted)"
        assert r["evil.tar!ok/hard"] == "hardlink member (not extracted)"
        assert r["evil.tar!ok/dev"] == r["evil.tar!ok/fifo"] == "device or fifo member (not extracted)"
        assert sorted(p.name.split("-", 1)[1] for p in b.tmpdir.iterdir() if p.name != ".owner") == ["rank_0.log"]
    assert outside_files(tmp_path) == before
    assert not abs_target.exists() and not (tmp_path.parent / "x").exists() and not (tmp_path / "x").exists()


def test_duplicate_and_control_char_member_names(tmp_path):
    t = tmp_path / "odd.tar"
    with tarfile.open(t, "w") as tf:
        add(tf, "a.log", b"first\n")
        add(tf, "a.log", b"second\n")                                # tar allows a name twice
        add(tf, "we\nird\x1b.log", b"x\n")
    with open_bundle(t) as b:
        assert [s.rel for s in b.sources] == ["odd.tar!a.log", "odd.tar!a.log~2", "odd.tar!we?ird?.log"]


def test_zip_traversal_and_symlink(tmp_path):
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("rank_0.log", LOG)
        zf.writestr("../x", b"pwned\n")
        zf.writestr("/abs_x", b"pwned\n")
        zf.writestr("C:/x", b"pwned\n")
        zf.writestr("a\\..\\..\\x", b"pwned\n")
        link = zipfile.ZipInfo("link")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
    before = outside_files(tmp_path)
    with open_bundle(z) as b:
        assert [s.rel for s in b.sources] == ["evil.zip!rank_0.log"]
        r = reasons(b)
        assert r["evil.zip!../x"] == "unsafe archive member path ../x"
        assert r["evil.zip!C:/x"] == "unsafe archive member path C:/x"
        assert r["evil.zip!link"] == "symlink member (not extracted)"
        assert sum(v.startswith("unsafe") for v in r.values()) == 4
    assert outside_files(tmp_path) == before and not (tmp_path.parent / "x").exists()


def test_zip_bomb_declared_size_over_cap(tmp_path):
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a_rank_0.log", LOG)
        zf.writestr("b_zeros.log", bytes(4 << 20))                    # 4 MiB of zeros, ~4 KiB packed
        zf.writestr("c_rank_1.log", LOG)
    before = outside_files(tmp_path)
    with open_bundle(z, max_extract_bytes=1 << 20) as b:
        assert [s.rel for s in b.sources] == ["bomb.zip!a_rank_0.log", "bomb.zip!c_rank_1.log"]
        assert reasons(b) == {"bomb.zip!b_zeros.log": "extraction cap reached (1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M): member is 4 MiB"}
        assert b.notes == ["extraction stopped at 1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M: 1 members not extracted"]
        assert sum(p.stat().st_size for p in b.tmpdir.iterdir() if p.name != ".owner") < 1 << 20
    assert outside_files(tmp_path) == before


def test_actual_bytes_counted_when_size_unknown(tmp_path):
    """A .bz2 declares nothing: the copy itself must stop at the cap."""
    f = tmp_path / "in" / "huge.log.bz2"
    f.parent.mkdir()
    f.write_bytes(bz2.compress(b"a" * (3 << 20)))
    (tmp_path / "in" / "rank_0.log").write_bytes(LOG)
    with open_bundle(tmp_path / "in", max_extract_bytes=1 << 20) as b:
        assert [s.rel for s in b.sources] == ["rank_0.log"]
        assert reasons(b) == {"huge.log.bz2": "extraction cap reached (1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M): member larger than declared"}
        assert b.notes == ["extraction stopped at 1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M: 1 members not extracted"]


def test_compressed_tar_bomb_stops_reading(tmp_path, monkeypatch):
    """A member over the extraction cap is read through (its logs after it are extracted: a core file before the
    logs, issue 30) while what is read through stays within the compression-ratio budget; a bomb past that budget
    stops the archive, as before."""
    t = tmp_path / "bomb.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        add(tf, "rank_0.log", LOG)
        add(tf, "zeros.bin", bytes(4 << 20))
        add(tf, "rank_1.log", LOG)
    with open_bundle(t, max_extract_bytes=1 << 20) as b:  # 4 MiB read through: under the ratio budget's floor
        assert [s.rel for s in b.sources] == ["bomb.tar.gz!rank_0.log", "bomb.tar.gz!rank_1.log"]
        r = reasons(b)
        assert r["bomb.tar.gz!zeros.bin"].startswith("extraction cap reached (1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M)")
        assert "bomb.tar.gz!*" not in r
    monkeypatch.setenv("DEBUGGER_RATIO_FROM", str(1 << 20))  # the ratio budget's floor at 1 MiB: 4 MiB is a bomb
    with open_bundle(t, max_extract_bytes=1 << 20) as b:
        assert [s.rel for s in b.sources] == ["bomb.tar.gz!rank_0.log"]
        r = reasons(b)
        assert r["bomb.tar.gz!zeros.bin"].startswith("extraction cap reached (1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M)")
        assert r["bomb.tar.gz!*"] == "extraction cap reached (1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M): remaining members not read"
        assert b.notes == ["extraction stopped at 1 MiB total; raise it with DEBUGGER_MAX_EXTRACT_BYTES=4M: 1 members not extracted; rest of bomb.tar.gz not read"]


def test_member_count_cap(tmp_path):
    z = tmp_path / "many.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(10):
            zf.writestr(f"rank_{i}.log", LOG)
    with open_bundle(z, max_members=3) as b:
        assert [s.rel for s in b.sources] == [f"many.zip!rank_{i}.log" for i in range(3)]
        assert len(b.skipped) == 7 and all(s.reason == "extraction cap reached (3 members; raise it with DEBUGGER_MAX_MEMBERS=12)" for s in b.skipped)
        assert b.notes == ["extraction stopped at 3 members; raise it with DEBUGGER_MAX_MEMBERS=12: 7 members not extracted"]


def test_nesting_depth_limit(tmp_path):
    data, name = LOG, "rank_0.log"
    for level in range(5):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            add(tf, name, data)
        data, name = buf.getvalue(), f"l{level}.tgz"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(data)
    (tmp_path / "in" / "ok.log").write_bytes(LOG)
    with open_bundle(tmp_path / "in") as b:
        assert [s.rel for s in b.sources] == ["ok.log"]
        assert reasons(b) == {"l4.tgz!l3.tgz!l2.tgz!l1.tgz": "nested archive too deep (more than 3 levels; raise it with DEBUGGER_MAX_NESTING=12)"}


def test_truncated_gzip(tmp_path, monkeypatch):
    d = tmp_path / "in"
    d.mkdir()
    full = gzip.compress(b"".join(b"line %d of a long log\n" % i for i in range(20000)))
    (d / "rank_1.log.gz").write_bytes(full[: len(full) // 2])
    (d / "rank_0.log").write_bytes(LOG)
    with open_bundle(d) as b:   # a small truncated .gz is kept like a large one: read to the break, marked partial
        assert [s.rel for s in b.sources] == ["rank_0.log", "rank_1.log.gz"] and reasons(b) == {}
        assert b.notes == ["rank_1.log.gz: truncated gzip: partial, read up to the break"]
        got = bytearray()
        with pytest.raises(READ_ERRORS), b.sources[1].open() as f:
            while chunk := f.read(1 << 16):
                got += chunk
        assert got.startswith(b"line 0 of a long log\n") and len(got) > 100_000
    (d / "empty.log.gz").write_bytes(gzip.compress(b"")[:5])
    with pytest.raises(BundleError, match=r"^no readable log files in .*\(1 skipped: 1 truncated gzip\)$"):
        open_bundle(d / "empty.log.gz")
    monkeypatch.setattr(walk, "GZIP_VERIFY_BYTES", 0)               # too big to test-read at open:
    with open_bundle(d) as b:                                         # the reader meets it mid-stream
        (s,) = [s for s in b.sources if s.gzip]
        with pytest.raises(READ_ERRORS) as ei, s.open() as f:
            while f.read(1 << 16):
                pass
        assert read_error_reason(ei.value) == "truncated gzip"


def test_corrupt_archives_are_skipped(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "ok.log").write_bytes(LOG)
    (d / "bad.zip").write_bytes(b"PK\x03\x04" + os.urandom(200))
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w:gz") as tf:
        add(tf, "a.log", LOG * 50)
        add(tf, "b.log", os.urandom(100_000))
    (d / "cut.tar.gz").write_bytes(good.getvalue()[:-20000])
    (d / "fake.tar.gz").write_bytes(b"\x1f\x8b" + os.urandom(300))
    (d / "w.txt").write_bytes("hello\r\n".encode("utf-16"))
    with open_bundle(d) as b:
        r = reasons(b)
        assert r["bad.zip"].startswith("corrupt archive") and r["fake.tar.gz"].startswith("corrupt gzip")
        assert any(k.startswith("cut.tar.gz!") for k in r)
        assert "w.txt" not in r  # UTF-16 is read decoded (issue 30), not refused
        assert {"ok.log", "w.txt"} <= {s.rel for s in b.sources}


def test_only_binaries_is_one_line_error(tmp_path):
    d = tmp_path / "bins"
    d.mkdir()
    for i in range(3):
        (d / f"model_{i}.bin").write_bytes(b"\x00\x01\x02" * 100 + os.urandom(100))
    with pytest.raises(BundleError) as ei:
        open_bundle(d)
    assert str(ei.value) == f"no readable log files in {d} (3 skipped: 3 binary)"


def test_error_message_is_one_line(tmp_path):
    f = tmp_path / "a\nb.bin"
    f.write_bytes(b"\x00" * 10)
    with pytest.raises(BundleError) as ei:
        open_bundle(f)
    assert "\n" not in str(ei.value)


def test_empty_dir_and_missing_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError, match=r"^no files found in .*empty$"):
        open_bundle(tmp_path / "empty")
    with pytest.raises(BundleError, match=r"^no such file or directory: .*nope$"):
        open_bundle(tmp_path / "nope")
    with pytest.raises(BundleError, match="no such file or directory"):
        open_bundle([tmp_path / "empty", "bad\x00name"])
    with pytest.raises(BundleError, match="no input given"):
        open_bundle([])


def test_non_utf8_and_crlf_kept(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "latin1.log").write_bytes("Fehler: Gerät nicht gefunden — ü\n".encode("latin-1", "replace") + b"\xff\xfe\x80\n")
    (d / "crlf.log").write_bytes(LOG.replace(b"\n", b"\r\n") * 5)
    (d / "ansi.log").write_bytes(b"\x1b[32m[NeMo I 2025-04-11 14:46:18 nemo_logging:393] hi\x1b[0m\n")
    with open_bundle(d) as b:
        assert [(s.rel, s.kind) for s in b.sources] == [("ansi.log", "nemo"), ("crlf.log", "rank_log"),
                                                        ("latin1.log", "generic")]


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_flight_recorder_pickle_never_loaded(tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    d = tmp_path / "fr"
    d.mkdir()
    (d / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [_Evil(marker)], "pg_config": {}}, protocol=4))
    (d / "comm_lib_trace_rank_1").write_bytes(pickle.dumps(_Evil(marker), protocol=5))
    (d / "random.pkl").write_bytes(pickle.dumps(_Evil(marker), protocol=4))     # not FR: just binary
    for name in ("load", "loads", "Unpickler"):                       # any attempt to unpickle fails loudly
        monkeypatch.setattr(pickle, name, lambda *a, **k: pytest.fail("unpickled"))
    with open_bundle(d) as b:
        assert [(s.rel, s.kind) for s in b.sources] == [("comm_lib_trace_rank_1", "fr_dump"),
                                                        ("nccl_trace_rank_0", "fr_dump")]
        assert reasons(b) == {"random.pkl": "binary file (no text)"}
    assert not marker.exists()


def test_dir_symlinks_fifo_and_unreadable(tmp_path):
    outside = tmp_path / "secret.log"
    outside.write_bytes(LOG)
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(LOG)
    (d / "out_file").symlink_to(outside)
    (d / "out_dir").symlink_to(tmp_path)
    (d / "dangling").symlink_to(tmp_path / "missing")
    os.mkfifo(d / "pipe")                                             # opening it would hang forever
    with open_bundle(d) as b:
        assert [s.rel for s in b.sources] == ["rank_0.log"]
        assert reasons(b) == {"out_file": "symlink pointing outside the bundle",
                              "out_dir": "symlink pointing outside the bundle",
                              "dangling": "broken symlink",
                              "pipe": "not a regular file (device, fifo or socket)"}

"""Issue 15, part A: extraction budgets checked while streaming. Bombs are generated here, small on disk (KiB to a
few MiB), and run through the real CLI (harness.run_cli): each must end in seconds, with one line naming the budget
and its variable, the rest of the bundle analysed, the temp dir removed and the input untouched."""

import bz2
import gzip
import io
import tarfile
import zipfile

import pytest
from harness import assert_clean, run_cli, snapshot, write_tar

WATCHDOG = ("[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600012 milliseconds before timing out.\n")


def rank_log(r: int) -> bytes:
    return (f"[rank{r}]:I1105 12:30:00.000000 1 torch/distributed/run.py:1] step 1 loss 2.5\n" +
            WATCHDOG.format(r=r)).encode()


# 2 MiB of one repeated, realistic line: compresses far past any log's ratio, scans quickly (few lines)
FILLER = (b"[rank0]:I1105 12:30:00.000000 1 trainer.py:88] " + b"." * 4000 + b"\n") * 512


def scan_json(args, env, **kw):
    import json
    res = run_cli(["scan", "--json", *args], env=env, **kw)
    return res, (json.loads(res.stdout) if res.rc == 0 and res.stdout.strip() else None)


def file_names(report) -> set[str]:
    """The files the scan names (schema_version 2: each group of alike files names its first and last)."""
    return {n for g in report["file_groups"] for n in g["exemplars"]}


def files_read(report) -> int:
    return sum(g["files"] for g in report["file_groups"]) + report.get("file_groups_cut", {}).get("files", 0)


def skipped_reasons(report) -> list[str]:
    return [s["reason"] for s in report["coverage"]["skipped"]]


def test_zip_of_many_compressible_members_stops_on_ratio(tmp_path, cli_env):
    """Many 2 MiB members at ~1000:1 each pass any per-member ratio check; the archive-wide ratio stops them."""
    z = tmp_path / "bomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank_0.log", rank_log(0))
        for i in range(20):          # 40 MiB out of ~60 KiB
            zf.writestr(f"fill_{i:03d}.log", FILLER)
    before = snapshot(z)
    env = dict(cli_env, DEBUGGER_MAX_RATIO="50", DEBUGGER_MIN_FREE_TMP="0", DEBUGGER_RATIO_FROM="8M")
    res, rep = scan_json([str(z)], env)
    assert_clean(res, rc_in=(0,), max_s=30)
    assert any("compression ratio over 50:1" in r and "DEBUGGER_MAX_RATIO" in r for r in skipped_reasons(rep)), rep
    assert any("extraction stopped" in n for n in rep["notes"])
    assert "bomb.zip!rank_0.log" in file_names(rep)   # what came before the stop is analysed
    assert snapshot(z) == before


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["gz", "bz2"])
def test_single_stream_bomb_of_text(tmp_path, cli_env, fmt):
    """A .gz read in place and a .bz2 copied out: both stop at the ratio budget while decompressing."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(rank_log(0))
    packer = gzip.compress if fmt == "gz" else bz2.compress
    (d / f"rank_1.log.{fmt}").write_bytes(packer(FILLER * 20))   # 40 MiB of text lines
    env = dict(cli_env, DEBUGGER_MAX_RATIO="20", DEBUGGER_MIN_FREE_TMP="0", DEBUGGER_RATIO_FROM="8M")
    res, rep = scan_json([str(d)], env)
    assert_clean(res, rc_in=(0,), max_s=40)
    why = skipped_reasons(rep) + rep["notes"] + [n for g in rep["file_groups"] for n in g.get("notes", [])]
    assert any("ratio" in w and "DEBUGGER_MAX_RATIO" in w for w in why), why
    assert "rank_0.log" in file_names(rep)


def test_bz2_of_zeros_is_skipped_without_extracting(tmp_path, cli_env):
    d = tmp_path / "in"
    d.mkdir()
    (d / "rank_0.log").write_bytes(rank_log(0))
    (d / "core.bz2").write_bytes(bz2.compress(bytes(16 << 20)))
    res, rep = scan_json([str(d)], cli_env)
    assert_clean(res, rc_in=(0,), max_s=20)
    assert any(r == "only NUL bytes inside bz2" for r in skipped_reasons(rep)), skipped_reasons(rep)


def test_tar_of_many_tiny_files_stops_on_files_budget(tmp_path, cli_env):
    t = tmp_path / "many.tar.gz"
    write_tar(t, ((f"logs/rank_{i}.log", rank_log(i)) for i in range(3000)))
    res, rep = scan_json([str(t)], dict(cli_env, DEBUGGER_MAX_FILES="200"))
    assert_clean(res, rc_in=(0,), max_s=30)
    assert files_read(rep) == 200
    assert any("200 files" in n and "DEBUGGER_MAX_FILES" in n for n in rep["notes"]), rep["notes"]


@pytest.mark.slow
def test_directory_of_many_files_is_capped_with_a_note(tmp_path, cli_env):
    d = tmp_path / "ranks"
    d.mkdir()
    for i in range(1500):
        (d / f"rank_{i}.log").write_bytes(rank_log(i))
    res = run_cli(["ask", str(d)], env=dict(cli_env, DEBUGGER_MAX_FILES="300"), timeout=60)
    assert_clean(res, rc_in=(0,), max_s=40)
    res, rep = scan_json([str(d)], dict(cli_env, DEBUGGER_MAX_FILES="300"))
    note = next(n for n in rep["notes"] if "files budget" in n)
    assert "first 300 files" in note and "1,200 more not read" in note and "DEBUGGER_MAX_FILES" in note


def test_members_budget_and_nesting_budget_name_their_variables(tmp_path, cli_env):
    z = tmp_path / "m.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(30):
            zf.writestr(f"rank_{i}.log", rank_log(i))
    res, rep = scan_json([str(z)], dict(cli_env, DEBUGGER_MAX_MEMBERS="10"))
    assert_clean(res, rc_in=(0,))
    assert files_read(rep) == 10 and any("DEBUGGER_MAX_MEMBERS" in n for n in rep["notes"])
    data, name = rank_log(0), "rank_0.log"
    for level in range(3):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        data, name = buf.getvalue(), f"l{level}.tgz"
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / name).write_bytes(data)
    (tmp_path / "n" / "rank_1.log").write_bytes(rank_log(1))
    res, rep = scan_json([str(tmp_path / "n")], dict(cli_env, DEBUGGER_MAX_NESTING="2"))
    assert_clean(res, rc_in=(0,))
    assert any("DEBUGGER_MAX_NESTING" in r for r in skipped_reasons(rep))


@pytest.mark.slow
def test_temp_filesystem_free_space_budget(tmp_path, cli_env):
    """Asking to keep more free space than any disk has: the first check stops extraction, naming TMPDIR."""
    z = tmp_path / "big.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank_0.log", rank_log(0))
        zf.writestr("rank_1.log", FILLER * 40)    # 80 MiB of text, past one free-space check
        zf.writestr("rank_2.log", rank_log(2))
    res, rep = scan_json([str(z)], dict(cli_env, DEBUGGER_MIN_FREE_TMP="1000T"))
    assert_clean(res, rc_in=(0,), max_s=30)
    assert any("temp filesystem nearly full" in r and "TMPDIR" in r for r in skipped_reasons(rep)), skipped_reasons(rep)


def test_bad_budget_value_is_one_line(tmp_path, cli_env):
    (tmp_path / "rank_0.log").write_bytes(rank_log(0))
    res = run_cli(["scan", str(tmp_path)], env=dict(cli_env, DEBUGGER_MAX_FILES="lots"))
    assert_clean(res, rc_in=(2,))
    assert "DEBUGGER_MAX_FILES='lots' is not a number" in res.stderr[-1]


def test_a_core_file_too_big_to_extract_does_not_hide_the_logs_after_it(tmp_path, cli_env):
    """Issue 30: a tarball with a large core file before the logs gave no answer: the member over the extraction
    budget ended the whole (compressed) stream. It is skipped, said, and the logs after it are read."""
    import os
    t = write_tar(tmp_path / "job.tar.gz", [("job/core.12345", os.urandom(24 << 20))]
                  + [(f"job/rank_{r}.log", rank_log(r)) for r in range(4)])
    res = run_cli(["ask", "--json", "--offline", t], env=dict(cli_env, DEBUGGER_MAX_EXTRACT_BYTES=str(8 << 20)),
                  timeout=120)
    assert_clean(res, rc_in=(0,), max_s=60)
    import json
    d = json.loads(res.stdout)
    assert d["coverage"]["seen_count"] == 4, d["coverage"]
    skipped = {s["file"]: s["reason"] for s in d["coverage"]["skipped"]}
    assert "extraction cap reached" in skipped.get("job.tar.gz!job/core.12345", ""), skipped
    assert not any(k.endswith("!*") for k in skipped), skipped  # nothing after it was given up

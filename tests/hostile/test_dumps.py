"""Issue 15, part B: flight-recorder dumps from strangers. A pickle bomb needs no global: memo references (a list
holding the previous list twice, 60 times) or one-byte opcodes that each build a list exhaust memory inside the
restricted unpickler; a JSON dump of 10^7 entries took 5 GB; huge integers or bytes where strings belong raised
Python errors. Each is now skipped with its reason and the real dumps beside it are analysed (examples/fr-gloo4
holds real dumps written by torch 2.10's gloo backend)."""

import io
import json
import pickle
import shutil
from pathlib import Path

import pytest
from harness import assert_clean, run_cli

import trainlog_debugger.tools.sources.flight_recorder.analyze as frdump
import trainlog_debugger.tools.sources.flight_recorder.unpickle as unpickle
from trainlog_debugger.tools.sources.flight_recorder.unpickle import DumpRefused

REAL = Path(__file__).resolve().parents[2] / "examples" / "fr-gloo4"


def memo_bomb(levels: int = 60) -> bytes:
    """L0 = []; Li = [L(i-1), L(i-1)]: 2^60 references in a few hundred bytes (protocol 2 opcodes)."""
    b = bytearray(b"\x80\x02]q\x00")                      # PROTO 2, EMPTY_LIST, BINPUT 0
    for i in range(1, levels):
        b += b"(h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"lq" + bytes([i])  # MARK BINGET BINGET LIST BINPUT
    return bytes(b + b".")


def list_bomb(n: int) -> bytes:
    """{'entries': [[], [], ...]}: two opcode bytes (EMPTY_LIST, APPEND) per 64-byte list."""
    return b"\x80\x02}q\x00X\x07\x00\x00\x00entriesq\x01]q\x02" + b"]a" * n + b"s."


def huge_values() -> bytes:
    return pickle.dumps({"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
                         "entries": [{"profiling_name": b"nccl:all_reduce", "process_group": (b"0", b"default_pg"),
                                      "collective_seq_id": 10 ** 5000, "state": b"scheduled", "record_id": 1}]})


@pytest.fixture
def dumps(tmp_path):
    d = tmp_path / "dumps"
    shutil.copytree(REAL, d)
    (d / "nccl_trace_rank_7").write_bytes(memo_bomb())
    (d / "nccl_trace_rank_8").write_bytes(huge_values())
    return d


@pytest.mark.slow
def test_bombs_are_skipped_and_the_rest_analysed(dumps, cli_env):
    res = run_cli(["fr", "--json", dumps], env=cli_env, timeout=60)
    assert_clean(res, rc_in=(0,), max_rss_mb=700, max_s=40)
    rep = json.loads(res.stdout)
    why = {s["file"]: s["reason"] for s in rep["skipped"]}
    assert why["nccl_trace_rank_7"].startswith("over budget: more than 6,000,000 objects")
    assert "integer of more than 300 digits" in why["nccl_trace_rank_8"]
    real = sorted(p.name for p in REAL.iterdir())
    assert len(real) == 4 and not set(real) & set(why)  # every real dump was read


@pytest.mark.slow
def test_memory_bomb_stops_at_the_load_budget(monkeypatch):
    monkeypatch.setattr(unpickle, "LOAD_MEMORY", 32 << 20)
    with pytest.raises(DumpRefused, match=r"^over budget: loading it needs more than 32 MiB"):
        frdump.load_dump(list_bomb(5_000_000))  # 10 MB of opcodes -> ~320 MB of lists unbounded
    import resource
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY  # the limit is lifted again


def test_json_dump_over_the_entry_budget_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(unpickle, "MAX_OBJECTS", 10_000)
    data = ('{"entries": [' + ",".join(['{"profiling_name": "nccl:all_reduce"}'] * 20_000) + "]}").encode()
    with pytest.raises(DumpRefused, match="over budget: 20,002 JSON objects"):
        frdump.load_dump(data)
    monkeypatch.setattr(unpickle, "MAX_ENTRIES", 100)
    small = ('{"entries": [' + ",".join(["{}"] * 101) + "]}").encode()
    with pytest.raises(DumpRefused, match="over budget: 101 entries"):
        frdump.load_dump(small)


def test_bytes_where_strings_belong_are_read():
    d = {"version": b"2.4", "pg_config": {b"0": {"name": b"0", "desc": b"default_pg", "ranks": b"[0, 1]"}},
         "entries": [{"profiling_name": b"nccl:all_reduce", "process_group": (b"0", b"default_pg"),
                      "collective_seq_id": b"3", "state": b"scheduled", "record_id": 10 ** 25, "input_sizes": [[b"4"]],
                      "frames": [{"name": b"step", "filename": b"train.py", "line": b"9"}]}]}
    rep = frdump.analyze({0: frdump.load_dump(pickle.dumps(d))})
    assert rep.groups and rep.groups[0].pg == "0"
    buf = io.BytesIO()
    pickle.dump(d, buf)
    assert frdump.load_dump(buf.getvalue())["version"] == b"2.4"


def test_ask_says_what_it_did_not_read(tmp_path):
    """Issue 30: `ask` never mentioned a refused flight-recorder dump, nor files skipped or cut short."""
    import shutil

    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.pipeline import investigate
    case = Path(__file__).resolve().parents[2] / "cases" / "gen-slurm-8r-a"
    for f in case.glob("*.out"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "nccl_trace_rank_3").write_bytes(b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94garbage")
    (tmp_path / "core.bin").write_bytes(bytes(range(256)) * 64)
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    notes = " | ".join(d.notes)
    assert "flight-recorder dump nccl_trace_rank_3 not read: corrupt or truncated pickle" in notes, notes
    assert "1 file(s) not read: binary file (no text) (1)" in notes, notes

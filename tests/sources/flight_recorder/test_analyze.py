"""trainlog_debugger.tools.sources.flight_recorder.analyze: flight-recorder dumps → stuck collective, missing ranks, mismatches, culprits; restricted unpickling.

Dumps are built like torch builds them (a dict per rank, `pickle.dump`, protocol 2, `process_group` a tuple) by
`make_entry` (FR's create_one_event style, with defaults) and `world()`; each case is a function in CASES so that
`python tests/sources/flight_recorder/test_analyze.py --write-cases DIR` writes them as `DIR/<case>/nccl_trace_rank_<N>` for comparison with
torch's own analyzer (`python -m torch.distributed.flight_recorder.fr_trace DIR/<case> --prefix nccl_trace_rank_`;
results in the tools/sources/flight_recorder/analyze.py docstring). torch is never needed here.
"""
from __future__ import annotations

import copy
import io
import json
import os
import pickle
import pickletools
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from trainlog_debugger.agent.render.fr import render_fr
from trainlog_debugger.tools.sources.flight_recorder import analyze as frdump
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.sources.flight_recorder.format import rank_from_name
from trainlog_debugger.tools.sources.flight_recorder.analyze import (
    DumpRefused,
    FRReport,
    analyze,
    analyze_bundle,
    entry_text,
    load_dump,
    verify_entry,
)

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_730_800_000_000_000_000
FRAMES = [{"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2501},
          {"name": "wrapper", "filename": "torch/distributed/c10d_logger.py", "line": 83},
          {"name": "train_step", "filename": "train.py", "line": 42}]


# ---- builders ------------------------------------------------------------------------------------------------------

def make_entry(pg: str = "0", seq: int = 1, op: str = "nccl:all_reduce", sizes=([4096],), state: str = "completed",
               *, desc: str = "default_pg", out_sizes=None, dtypes=("Float",), out_dtypes=None, record_id: int = 0,
               pg_id: int | None = None, p2p_seq: int = 0, is_p2p: bool | None = None, frames=None,
               created: int | None = None, retired: bool | None = None) -> dict:
    """One FR entry as torch ≥2.5 writes it; defaults describe a completed 4096-float all_reduce on the default PG."""
    is_p2p = (" " in op and op.split(":")[-1].split()[0] in ("send", "recv")) if is_p2p is None else is_p2p
    sizes = [list(s) for s in sizes]
    created = T0 + (seq * 1_000_000 if created is None else created)
    return {
        "record_id": record_id, "pg_id": int(pg) if pg_id is None and pg.isdigit() else (pg_id or 0),
        "process_group": (pg, desc), "collective_seq_id": 0 if is_p2p else seq, "p2p_seq_id": p2p_seq if is_p2p else 0,
        "op_id": seq, "profiling_name": op, "time_created_ns": created,
        "time_discovered_started_ns": None if state == "scheduled" else created + 1000,
        "time_discovered_completed_ns": created + 2000 if state == "completed" else None,
        "duration_ms": None, "input_sizes": sizes, "output_sizes": [list(s) for s in (out_sizes or sizes)],
        "input_dtypes": list(dtypes), "output_dtypes": list(out_dtypes or dtypes), "is_p2p": is_p2p,
        "state": state, "retired": state == "completed" if retired is None else retired, "timeout_ms": 600000,
        "frames": copy.deepcopy(FRAMES if frames is None else frames), "thread_id": "140001", "thread_name": "pt_main",
    }


def make_dump(entries: list[dict], pgs: dict[str, tuple[str, list[int]]], *, version: str = "2.4",
              pg_status: dict | None = None) -> dict:
    for i, e in enumerate(entries):
        e.setdefault("record_id", i)
    return {"version": version, "comm_lib_version": "2.21.5",
            "pg_config": {name: {"name": name, "desc": desc, "ranks": str(list(ranks))}
                          for name, (desc, ranks) in pgs.items()},
            "pg_status": pg_status or {}, "entries": entries}


def world(n: int, seqs: int = 5, last_state: str = "started", pg: str = "0", desc: str = "default_pg") -> dict[int, dict]:
    """n ranks that all completed collectives 1..seqs-1 and are all in `last_state` at #seqs."""
    dumps = {}
    for r in range(n):
        es = [make_entry(pg, s, state="completed" if s < seqs else last_state, desc=desc, record_id=s - 1)
              for s in range(1, seqs + 1)]
        dumps[r] = make_dump(es, {pg: (desc, list(range(n)))})
    return dumps


def renumber(dump: dict) -> dict:
    for i, e in enumerate(dump["entries"]):
        e["record_id"] = i
    return dump


def write(dumps: dict[int, dict], d: Path, json_ranks=()) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for r, dump in dumps.items():
        if r in json_ranks:
            (d / f"nccl_trace_rank_{r}.json").write_text(json.dumps(_jsonish(dump)))
        else:
            with open(d / f"nccl_trace_rank_{r}", "wb") as f:
                pickle.dump(dump, f, protocol=2)   # torch's own writer emits protocol 2
    return d


def _jsonish(dump: dict) -> dict:
    """What _dump_nccl_trace_json gives: no frames, pg_status values as strings."""
    d = copy.deepcopy(dump)
    for e in d["entries"]:
        e.pop("frames", None)
    d["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in d.get("pg_status", {}).items()}
    return d


def run(dumps: dict[int, dict], tmp_path: Path, json_ranks=()) -> FRReport:
    with open_bundle(write(dumps, tmp_path / "dumps", json_ranks)) as b:
        rep = analyze_bundle(b)
    assert rep is not None
    return rep


def group(rep: FRReport, pg: str = "0"):
    return next(g for g in rep.groups if g.pg == pg)


def check_citations(rep: FRReport, root: Path) -> list:
    """Every finding cites dump entries that verify_entry accepts."""
    fs = rep.findings()
    for f in fs:
        for ev in f.evidence:
            assert ev.kind == "fr_dump" and ev.line >= 1 and "\n" not in ev.text
            assert verify_entry(root / ev.file, ev.line, ev.text), ev
    return fs


# ---- cases (shared with --write-cases) -------------------------------------------------------------------------------

def case_all_completed():
    return world(4, seqs=6, last_state="completed")


def case_never_joined(n=4, culprit=3):
    d = world(n, seqs=5)
    d[culprit]["entries"].pop()          # its newest entry is #4: it never called #5
    return d


def case_never_joined_128():
    return case_never_joined(128, 77)


def case_op_mismatch(culprit=2):
    d = world(4, seqs=5)
    d[culprit]["entries"][-1]["profiling_name"] = "nccl:all_gather"
    d[culprit]["entries"][-1]["output_sizes"] = [[16384]]
    return d


def case_op_mismatch_rank0():
    return case_op_mismatch(0)


def case_size_mismatch():
    d = world(4, seqs=5)
    d[1]["entries"][-1]["input_sizes"] = d[1]["entries"][-1]["output_sizes"] = [[2048]]
    return d


def case_dtype_mismatch():
    d = world(4, seqs=5)
    d[2]["entries"][-1]["input_dtypes"] = d[2]["entries"][-1]["output_dtypes"] = ["BFloat16"]
    return d


def case_two_pgs():
    """default_pg (0-3) stuck at #6, rank 1 never joined it; tp group "1" (2,3) stuck at #3 earlier, rank 3 missing.
    Rank 1 is blocked elsewhere; rank 3 never joined tp #3, which began first."""
    pgs = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("tp", [2, 3])}
    dumps = {}
    for r in range(4):
        es = []
        for s in range(1, 7):
            if r == 1 and s == 6:
                continue
            es.append(make_entry("0", s, state="completed" if s < 6 else "started", created=s * 10_000_000))
            if r in (2, 3) and s <= 3 and not (r == 3 and s == 3):
                es.append(make_entry("1", s, op="nccl:_reduce_scatter_base", sizes=[[8192]], out_sizes=[[4096]],
                                     desc="tp", state="completed" if s < 3 else "started",
                                     created=s * 10_000_000 + 1))
        dumps[r] = renumber(make_dump(es, pgs))
    return dumps


def ring(entries: list[dict], size: int) -> list[dict]:
    """What the ring buffer keeps: record ids count every entry a rank ever recorded; only the newest `size` stay."""
    for i, e in enumerate(entries):
        e["record_id"] = i
    return entries[-size:]


def case_ring_truncation():
    """Buffer of 10 entries on every rank. Ranks 0 and 1 are also in a busy PG "1" (36 all_reduces between
    default_pg #1 and #4), so their buffers wrapped and hold default_pg from #4 only (record ids 32-41); ranks 2
    and 3 hold #1-#6 (ids 0-5). Rank 3 never joined #6."""
    pgs = {"0": ("default_pg", [0, 1, 2, 3]), "1": ("pair01", [0, 1])}
    dumps = {}
    for r in range(4):
        es, side = [], 0
        for s in range(1, 7):
            if r == 3 and s == 6:
                continue
            es.append(make_entry("0", s, state="completed" if s < 6 else "started", created=s * 100_000_000))
            if r < 2 and s <= 3:
                for _ in range(12):
                    side += 1
                    es.append(make_entry("1", side, desc="pair01", created=s * 100_000_000 + side))
        dumps[r] = make_dump(ring(es, 10), pgs)
    return dumps


def case_truncated_past_stuck():
    """Buffer of 10. Ranks 0-2 wait in #3. Rank 3 enqueued #3, then 12 ops in its own PG "2", then #4 and #5: its
    buffer holds default_pg from #4 only, so #3 fell out of it: rank 3 is not missing."""
    pgs = {"0": ("default_pg", [0, 1, 2, 3])}
    d = {r: make_dump(ring([make_entry("0", s, state="completed" if s < 3 else "started") for s in (1, 2, 3)], 10),
                      pgs) for r in range(3)}
    es = [make_entry("0", s, state="completed" if s < 3 else "started") for s in (1, 2, 3)]
    es += [make_entry("2", s, desc="side") for s in range(1, 13)]
    es += [make_entry("0", s, state="scheduled") for s in (4, 5)]
    d[3] = make_dump(ring(es, 10), {**pgs, "2": ("side", [3])})
    return d


def case_no_dump():
    d = world(4, seqs=5)
    del d[3]
    return d


CASES = {name[5:]: fn for name, fn in dict(globals()).items() if name.startswith("case_")}


# ---- analysis ------------------------------------------------------------------------------------------------------

def test_all_completed_has_no_culprit(tmp_path):
    rep = run(case_all_completed(), tmp_path)
    g = group(rep)
    assert g.stuck_seq is None and g.culprits == [] and g.missing_ranks == [] and g.mismatches == []
    assert g.last_done_seq == 6 and rep.culprits == [] and rep.first_stuck is None
    assert rep.findings() == [] and sorted(rep.dumps) == [0, 1, 2, 3] and rep.skipped == []


@pytest.mark.parametrize("n,culprit", [(4, 3), (128, 77)])
def test_rank_that_never_joined_is_the_culprit(tmp_path, n, culprit):
    rep = run(case_never_joined(n, culprit), tmp_path)
    g = group(rep)
    assert (g.stuck_seq, g.op, g.seq_kind) == (5, "nccl:all_reduce", "collective")
    assert g.missing_ranks == [culprit] and g.culprits == [culprit] and rep.culprits == [culprit]
    assert g.culprit_reasons[culprit] == ["never_joined"]
    assert g.state_by_rank[culprit] == "missing"
    assert {g.state_by_rank[r] for r in range(n) if r != culprit} == {"started"}
    assert g.last_seen[culprit] == {"seq": 4, "op": "nccl:all_reduce", "state": "completed", "entry": 4}
    assert g.frames == [{"ranks": [r for r in range(n) if r != culprit], "frames": FRAMES}]   # collapsed
    assert g.mismatches == [] and g.no_dump_ranks == [] and rep.no_dump_ranks == []
    fs = check_citations(rep, tmp_path / "dumps")
    (f,) = fs
    assert f.id == "fr.missing_ranks" and f.ranks == [culprit] and f.role.value == "root_candidate"
    first = f.evidence[0]   # the culprit's own newest entry comes first: the proof that it stopped at #4
    assert (first.file, first.line, first.rank) == (f"nccl_trace_rank_{culprit}", 4, culprit)
    assert json.loads(first.text)["collective_seq_id"] == 4
    assert f.facts["missing_ranks"] == [culprit] and f.facts["seq"] == 5


@pytest.mark.parametrize("culprit", [2, 0])
def test_different_op_at_same_seq_blames_the_minority(tmp_path, culprit):
    rep = run(case_op_mismatch(culprit), tmp_path)
    g = group(rep)
    (m,) = [m for m in g.mismatches if m.field == "profiling_name"]
    assert (m.seq, m.type_of_mismatch, m.expected) == (5, "COLLECTIVE_TYPE_MISMATCH", "nccl:all_reduce")
    assert m.found == {"nccl:all_reduce": [r for r in range(4) if r != culprit], "nccl:all_gather": [culprit]}
    assert m.culprit_ranks == [culprit] and g.culprits == [culprit] and g.op == "nccl:all_reduce"
    assert g.missing_ranks == []
    fs = check_citations(rep, tmp_path / "dumps")
    f = next(f for f in fs if f.id == "fr.mismatch")
    assert f.ranks == [culprit] and f.evidence[0].rank == culprit and f.evidence[0].line == 5


def test_size_mismatch(tmp_path):
    rep = run(case_size_mismatch(), tmp_path)
    (m,) = group(rep).mismatches
    assert (m.type_of_mismatch, m.field, m.culprit_ranks) == ("SIZE_OR_SYNTAX_MISMATCH", "input_sizes", [1])
    assert m.found == {"[[4096]]": [0, 2, 3], "[[2048]]": [1]} and m.expected == "[[4096]]"
    assert group(rep).culprits == [1]
    check_citations(rep, tmp_path / "dumps")


def test_dtype_mismatch(tmp_path):
    rep = run(case_dtype_mismatch(), tmp_path)
    ms = group(rep).mismatches
    assert {(m.type_of_mismatch, m.field) for m in ms} == {("COLLECTIVE_DTYPE_MISMATCH", "input_dtypes"),
                                                          ("COLLECTIVE_DTYPE_MISMATCH", "output_dtypes")}
    assert all(m.culprit_ranks == [2] and m.expected == '["Float"]' for m in ms)
    assert group(rep).culprits == [2]


def test_sizes_that_differ_by_design_are_not_mismatches():
    d = world(4, seqs=3, last_state="completed")
    for r in range(4):
        d[r]["entries"][-1].update(profiling_name="nccl:all_to_all", input_sizes=[[r + 1]], output_sizes=[[4 - r]])
    g = analyze(d).groups[0]
    assert g.mismatches == [] and g.stuck_seq is None


def test_two_pgs_stuck_at_different_seqs(tmp_path):
    rep = run(case_two_pgs(), tmp_path)
    g0, g1 = group(rep, "0"), group(rep, "1")
    assert (g0.stuck_seq, g0.missing_ranks, g0.culprits) == (6, [1], [1])
    assert (g1.desc, g1.members, g1.stuck_seq, g1.op) == ("tp", [2, 3], 3, "nccl:_reduce_scatter_base")
    assert g1.missing_ranks == [3] and g1.state_by_rank == {2: "started", 3: "missing"}
    assert rep.first_stuck == "1" and rep.culprits == [1, 3]     # tp #3 began before default_pg #6
    assert any("2 PGs are stuck" in n for n in rep.notes)
    fs = check_citations(rep, tmp_path / "dumps")
    assert sorted(f.facts["pg"] for f in fs if f.id == "fr.missing_ranks") == ["0", "1"]


def test_ring_buffer_truncation_is_not_missing(tmp_path):
    rep = run(case_ring_truncation(), tmp_path)
    g = group(rep)
    assert pickle.loads((tmp_path / "dumps" / "nccl_trace_rank_0").read_bytes())["entries"][0]["record_id"] == 32
    assert g.stuck_seq == 6 and g.missing_ranks == [3] and g.culprits == [3] and g.mismatches == []
    assert g.state_by_rank == {0: "started", 1: "started", 2: "started", 3: "missing"}
    assert group(rep, "1").stuck_seq is None and rep.culprits == [3]


def test_seq_older_than_a_ranks_buffer_is_not_recorded_not_missing(tmp_path):
    rep = run(case_truncated_past_stuck(), tmp_path)
    g = group(rep)
    assert g.stuck_seq == 3 and g.state_by_rank == {0: "started", 1: "started", 2: "started", 3: "not_recorded"}
    assert g.missing_ranks == [] and g.culprits == [] and g.not_recorded_ranks == [3]
    assert group(rep, "2").stuck_seq is None
    assert any("ring buffer no longer holds #3" in n for n in g.notes)


def test_json_form_gives_the_same_verdict(tmp_path):
    rep = run(case_never_joined(), tmp_path, json_ranks=(0, 1, 2, 3))
    g = group(rep)
    assert g.missing_ranks == [3] and g.culprits == [3] and g.frames == []     # JSON dumps carry no frames
    assert rep.dumps[3] == "nccl_trace_rank_3.json"
    check_citations(rep, tmp_path / "dumps")
    mixed = run(case_never_joined(), tmp_path / "mixed", json_ranks=(1,))
    assert group(mixed).culprits == [3]


def test_rank_with_no_dump_is_listed_not_guessed(tmp_path):
    rep = run(case_no_dump(), tmp_path)
    g = group(rep)
    assert rep.no_dump_ranks == [3] and rep.expected_ranks == [0, 1, 2, 3] and g.no_dump_ranks == [3]
    assert g.state_by_rank == {0: "started", 1: "started", 2: "started", 3: "no_dump"}
    assert g.missing_ranks == [] and g.culprits == []
    assert any("no dump" in n for n in g.notes)
    (f,) = check_citations(rep, tmp_path / "dumps")
    assert f.id == "fr.stuck_collective" and f.ranks == [3] and "rank 3 has no dump" in f.summary


def test_state_mismatch_blames_only_ranks_behind():
    d = world(8, seqs=5)
    d[5]["entries"][-1]["state"] = "scheduled"      # its GPU never reached #5
    g = analyze(d).groups[0]
    (m,) = g.mismatches
    assert (m.type_of_mismatch, m.expected, m.culprit_ranks) == ("COLLECTIVE_STATE_MISMATCH", "started", [5])
    assert g.culprits == [5] and g.missing_ranks == []


def test_pg_status_and_later_completion_mark_done():
    d = world(2, seqs=3, last_state="completed")
    for r in d:
        for e in d[r]["entries"]:
            e["state"] = "scheduled"               # gloo-like: state never moves
        d[r]["entries"][-1]["retired"] = False     # #3 not retired: only pg_status can say it finished
        d[r]["pg_status"] = {"0": {"last_enqueued_collective": 3, "last_started_collective": -1,
                                   "last_completed_collective": 3}}
    assert analyze(d).groups[0].stuck_seq is None
    d[1]["pg_status"]["0"]["last_completed_collective"] = 2
    g = analyze(d).groups[0]
    assert g.stuck_seq == 3 and g.state_by_rank == {0: "completed", 1: "scheduled"}


def test_pg_status_last_enqueued_confirms_missing():
    d = case_never_joined()
    for r in d:
        n = 4 if r == 3 else 5
        d[r]["pg_status"] = {"0": {"last_enqueued_collective": n, "last_started_collective": n,
                                   "last_completed_collective": 4}}
    g = analyze(d).groups[0]
    assert g.missing_ranks == [3] and g.last_seen[3]["last_enqueued_collective"] == 4


def test_more_missing_than_joined_blames_the_ranks_that_joined_alone():
    d = world(4, seqs=4, last_state="completed")
    d[2]["entries"].append(make_entry("0", 5, op="nccl:barrier", sizes=[], state="started", record_id=4))
    g = analyze(d).groups[0]
    assert g.stuck_seq == 5 and g.missing_ranks == [0, 1, 3] and g.culprits == [2]
    assert g.culprit_reasons == {2: ["joined_alone"]}
    (f,) = analyze(d).findings()
    assert f.ranks == [2] and "only rank 2 entered" in f.summary


def test_p2p_send_without_a_recv():
    pgs = {"0": ("default_pg", [0, 1])}
    d = {0: make_dump([make_entry("0", 1, state="completed"),
                       make_entry("0", 2, op="nccl:send 0->1", p2p_seq=1, state="started", record_id=1)], pgs),
         1: make_dump([make_entry("0", 1, state="completed")], pgs)}
    g = analyze(d).groups[0]
    assert (g.stuck_seq, g.op, g.seq_kind) == (1, "nccl:send 0->1", "p2p")
    (p,) = g.p2p_pending
    assert (p["rank"], p["peer"], p["peer_state"]) == (0, 1, "missing") and g.culprits == [1]
    d[1]["entries"].append(make_entry("0", 2, op="nccl:recv 1<-0", p2p_seq=1, state="started", sizes=[[8]],
                                      record_id=1))
    g = analyze(d).groups[0]
    assert g.p2p_pending[0]["peer_state"] == "started" and "size_mismatch" in g.p2p_pending[0]


def test_torch_2_3_single_seq_id():
    d = world(4, seqs=3)
    for r in d:
        for e in d[r]["entries"]:
            e["seq_id"] = e.pop("collective_seq_id")
            for k in ("p2p_seq_id", "is_p2p", "input_dtypes", "output_dtypes"):
                e.pop(k)
    d[3]["entries"].pop()
    g = analyze(d).groups[0]
    assert g.stuck_seq == 3 and g.missing_ranks == [3]


def test_split_groups_sharing_a_pg_name():
    """split_group: one pg_name, different rank sets per rank: analysed as two groups."""
    dumps = {}
    for r in range(4):
        ranks = [0, 1] if r < 2 else [2, 3]
        es = [make_entry("5", s, desc="split", state="completed" if s < 2 else "started") for s in (1, 2)]
        if r == 3:
            es.pop()
        dumps[r] = renumber(make_dump(es, {"5": ("split", ranks)}))
    rep = analyze(dumps)
    assert sorted(g.pg for g in rep.groups) == ["5@0-1", "5@2-3"]
    assert next(g for g in rep.groups if g.pg == "5@2-3").culprits == [3]
    assert next(g for g in rep.groups if g.pg == "5@0-1").culprits == []


# ---- real torch 2.13 dumps (gloo, CPU) -----------------------------------------------------------------------------

@pytest.mark.parametrize("sub", ["gloo-2.13", "gloo-2.13-json"])
def test_real_torch_dumps(sub):
    with open_bundle(FIXTURES / sub) as b:
        rep = analyze_bundle(b)
    assert rep is not None and rep.skipped == [] and sorted(rep.dumps) == [0, 1, 2, 3]
    g = group(rep)
    assert (g.desc, g.members, g.stuck_seq, g.op) == ("default_pg", [0, 1, 2, 3], 5, "gloo:all_reduce")
    assert g.missing_ranks == [3] and g.culprits == [3] and g.members_from == "entries"
    assert g.last_seen[3]["op"] == "gloo:barrier" and g.last_seen[3]["last_enqueued_collective"] == 4
    pair = group(rep, "1")
    assert (pair.desc, pair.members, pair.stuck_seq) == ("pair01", [0, 1], None)
    check_citations(rep, FIXTURES / sub)


# ---- reading: restricted unpickler -----------------------------------------------------------------------------------

class _System:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return os.system, (self.cmd,)


def _opcodes(data: bytes) -> set[str]:
    return {op.name for op, _, _ in pickletools.genops(data)}


REFUSED = re.compile(r"^refused: the pickle asks for [\w.]+; flight-recorder dumps only contain plain data$")


def test_malicious_reduce_is_refused_and_not_run(tmp_path):
    marker = tmp_path / "pwned"
    for proto in (0, 2, 4, 5):
        payload = pickle.dumps({"version": "2.4", "entries": [_System(f"touch {marker}")]}, protocol=proto)
        assert _opcodes(payload) & {"GLOBAL", "STACK_GLOBAL"} and "REDUCE" in _opcodes(payload)
        with pytest.raises(DumpRefused) as exc:
            load_dump(payload)
        assert REFUSED.match(str(exc.value)) and re.search(r"(os|posix|nt)\.system", str(exc.value))
    assert not marker.exists()


def test_builtins_eval_global_is_refused_and_not_run(tmp_path):
    marker = tmp_path / "evaluated"
    payload = (b"cbuiltins\neval\n(V__import__('pathlib').Path(" + repr(str(marker)).encode() +
               b").write_text('x')\ntR.")
    assert "GLOBAL" in _opcodes(payload)
    with pytest.raises(DumpRefused, match=r"^refused: the pickle asks for builtins\.eval; "):
        load_dump(payload)
    assert not marker.exists()


def test_refused_dump_in_a_bundle_is_skipped_with_one_line(tmp_path):
    marker = tmp_path / "pwned"
    d = write(case_never_joined(), tmp_path / "b")
    (d / "nccl_trace_rank_2").write_bytes(pickle.dumps({"entries": [_System(f"touch {marker}")]}, protocol=2))
    with open_bundle(d) as b:
        rep = analyze_bundle(b)
    assert not marker.exists()
    (s,) = rep.skipped
    assert s["file"] == "nccl_trace_rank_2" and REFUSED.match(s["reason"]) and "\n" not in s["reason"]
    g = group(rep)
    assert rep.no_dump_ranks == [2] and g.state_by_rank[2] == "no_dump" and g.missing_ranks == [3]
    out = io.StringIO()
    render_fr(rep, Console(file=out, width=160))
    assert "skipped nccl_trace_rank_2: refused: the pickle asks for" in out.getvalue()


@pytest.mark.parametrize("payload,reason", [
    (b"\x80\x02(I1\nQ.", "persistent"),                               # BINPERSID
    (b"\x80\x02}q\x00(X\x07\x00\x00\x00entries", "truncated"),         # cut mid-stream
    (b"", "empty"),
    (b"\x80\x02]q\x00.", "top level is a list"),
    (b'{"entries": [', "corrupt JSON"),
    (b"\x80\x04\x95" + b"\x00" * 8 + b"\x8c\x02os\x94\x8c\x06system\x94\x93\x94.", "asks for os.system"),  # STACK_GLOBAL
    (b"\x80\x02\x82\x01.", "extension code 1"),                        # EXT1: extension registry
    (b"(i__main__\n_System\n.", "asks for __main__._System"),          # INST
])
def test_other_bad_inputs_are_refused_in_one_line(payload, reason):
    with pytest.raises(DumpRefused) as exc:
        load_dump(payload)
    assert reason in str(exc.value) and "\n" not in str(exc.value)


def test_deep_nesting_and_size_cap(monkeypatch):
    deep = b"\x80\x02" + b"]" * 100 + b"a" * 99 + b"."
    with pytest.raises(DumpRefused, match="nested"):
        load_dump(deep)
    monkeypatch.setattr(frdump, "MAX_DUMP_BYTES", 1000)
    with pytest.raises(DumpRefused, match="cap"):
        load_dump(pickle.dumps({"entries": ["x" * 2000]}, protocol=2))


def test_plain_containers_are_admitted():
    data = {"version": "2.4", "entries": [{"a": [1, -2**70, 2.5, True, None, "é", (1, "x")]}], "pg_config": {}}
    for proto in range(0, 6):
        assert load_dump(pickle.dumps(data, protocol=proto)) == data
    more = {"entries": [], "x": (b"b", {3}, frozenset())}   # opcodes of protocol 4-5 only
    for proto in (4, 5):
        assert load_dump(pickle.dumps(more, protocol=proto)) == more
    assert load_dump(pickle.dumps({"entries": [bytearray(b"y")]}, protocol=5))["entries"] == [b"y"]  # BYTEARRAY8
    with pytest.raises(DumpRefused, match="_codecs.encode"):   # protocol 2 pickles bytes through a global
        load_dump(pickle.dumps(more, protocol=2))


_LEAF = st.none() | st.booleans() | st.integers(-3, 2**64) | st.floats() | st.text(max_size=4) | st.binary(max_size=2)
_PLAIN = _LEAF | st.lists(_LEAF, max_size=2) | st.dictionaries(st.sampled_from(["0", "ranks", "name", 1]), _LEAF,
                                                                max_size=2)
_KEYS = ["record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "is_p2p", "profiling_name",
         "state", "retired", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes", "frames", "seq_id",
         "time_created_ns"]
_ENTRY = st.fixed_dictionaries({}, optional={k: _PLAIN for k in _KEYS}) | st.fixed_dictionaries(
    {"process_group": st.sampled_from([("0", "default_pg"), ["1", "tp"], ("x",)]),
     "collective_seq_id": st.integers(-1, 6), "p2p_seq_id": st.integers(0, 3), "is_p2p": st.booleans(),
     "profiling_name": st.sampled_from(["nccl:all_reduce", "nccl:send 0->1", "nccl:recv 1<-0", "gloo:barrier",
                                         "nccl:send 9->0", "nccl:all_to_all", "nonsense"]),
     "state": st.sampled_from(["scheduled", "started", "completed", "weird"]), "retired": st.booleans(),
     "record_id": st.integers(0, 50), "input_sizes": _PLAIN, "output_sizes": _PLAIN, "input_dtypes": _PLAIN})
_DUMP = st.fixed_dictionaries({"entries": st.lists(_ENTRY, max_size=6)},
                              optional={"pg_config": _PLAIN | st.just({"0": {"name": "0", "desc": "d",
                                                                             "ranks": "[0, 1, 2]"}}),
                                        "pg_status": _PLAIN, "version": _PLAIN})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(0, 3), _DUMP, max_size=3))
def test_analyze_never_raises_on_plain_data(dumps):
    rep = analyze(dumps)
    rep.findings()
    json.dumps(rep.to_json(), default=str)
    render_fr(rep, Console(file=io.StringIO(), width=120))


# ---- citations -------------------------------------------------------------------------------------------------------

def test_verify_entry(tmp_path):
    d = write(case_never_joined(), tmp_path / "v")
    dump = pickle.loads((d / "nccl_trace_rank_0").read_bytes())
    text = entry_text(dump["entries"][2])
    assert text == json.dumps(dump["entries"][2], sort_keys=True, default=str) and "\n" not in text
    assert verify_entry(d / "nccl_trace_rank_0", 3, text)
    assert verify_entry(str(d / "nccl_trace_rank_0"), 3, text)
    assert not verify_entry(d / "nccl_trace_rank_0", 4, text)
    assert not verify_entry(d / "nccl_trace_rank_0", 0, text)
    assert not verify_entry(d / "nccl_trace_rank_0", 99, text)
    assert not verify_entry(d / "nccl_trace_rank_0", 3, text.replace("4096", "4097"))
    assert not verify_entry(d / "missing_file", 1, text)
    (d / "evil").write_bytes(pickle.dumps({"entries": [_System("true")]}))
    assert not verify_entry(d / "evil", 1, text)


def test_citations_inside_an_archive_verify_through_the_bundle_source(tmp_path):
    import tarfile
    d = write(case_never_joined(), tmp_path / "d")
    with tarfile.open(tmp_path / "fr.tgz", "w:gz") as tf:
        tf.add(d, arcname="dumps")
    with open_bundle(tmp_path / "fr.tgz") as b:
        rep = analyze_bundle(b)
        (f,) = rep.findings()
        srcs = {s.rel: s for s in b.sources}
        assert f.evidence[0].file == "fr.tgz!dumps/nccl_trace_rank_3"
        assert all(verify_entry(srcs[ev.file], ev.line, ev.text) for ev in f.evidence)
        assert not verify_entry(srcs[f.evidence[0].file], f.evidence[0].line + 1, f.evidence[0].text)


def test_rank_from_name():
    assert rank_from_name("nccl_trace_rank_3") == 3
    assert rank_from_name("dumps/comm_lib_trace_rank_12.json") == 12
    assert rank_from_name("logs.tgz!fr/trace_rank_7.pkl.gz") == 7
    assert rank_from_name("custom_prefix_5") == 5
    assert rank_from_name("trace") is None


def test_no_fr_dump_in_bundle_gives_none(tmp_path):
    (tmp_path / "rank_0.log").write_text("[rank0]: hello\n")
    with open_bundle(tmp_path) as b:
        assert analyze_bundle(b) is None


# ---- rendering -------------------------------------------------------------------------------------------------------

def test_render_groups_ranks_and_highlights_culprits(tmp_path):
    rep = run(case_never_joined_128(), tmp_path)
    con = Console(file=io.StringIO(), width=200, record=True, force_terminal=True)
    render_fr(rep, con)
    styled = con.export_text(styles=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", styled)
    assert "STUCK at collective #5 nccl:all_reduce" in text and "culprits 77" in text
    assert "0-76,78-127" in text and "never_joined" in text
    assert "showing" not in text
    assert "\x1b[1;31m77" in styled                               # culprit row in bold red


def test_render_says_what_it_cut():
    d = world(20, seqs=2)
    for r in d:
        d[r]["entries"][-1]["input_sizes"] = d[r]["entries"][-1]["output_sizes"] = [[r + 1]]
    con = Console(file=io.StringIO(), width=200, record=True)
    render_fr(analyze(d), con)
    assert "showing 12 of 20 rows" in con.export_text()


def test_json_view_is_plain(tmp_path):
    rep = run(case_two_pgs(), tmp_path)
    j = json.loads(json.dumps(rep.to_json()))
    assert j["culprits"] == [1, 3] and "_raw" not in j and j["groups"][0]["state_by_rank"]["1"] == "missing"


# ---- comparison helper -----------------------------------------------------------------------------------------------

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-cases":
        for name, fn in CASES.items():
            out = write(fn(), Path(sys.argv[2]) / name)
            print(out)
    else:
        sys.exit("usage: python tests/sources/flight_recorder/test_analyze.py --write-cases DIR")

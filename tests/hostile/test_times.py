"""Issue 15, part B: an ordinary Cloud Logging JSONL export mixes times with and without a zone offset (the entry's
`timestamp` ends in `Z`, the c10 header inside `textPayload` has none, FORMATS.md §8), and exports edited or made
by other tools carry numbers, lists or null where the LogEntry schema has strings. `scan`, `ask` and `nccl` read what
can be read, say which rule reads mixed zones, and never fail on a naive/aware comparison."""

import json

import pytest
from harness import assert_clean, run_cli

from trainlog_debugger.tools.groups import parse_rank_set
from trainlog_debugger.tools.lines.timestamps import mixed_zone_note, parse_stamp

C10 = ("[rank{r}]:[E1105 12:00:0{s}.123456789 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
       "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
       "600016 milliseconds before timing out.")


def entry(i, ts, text, task="workerpool0-0", **over):
    e = {"insertId": str(i), "logName": f"projects/p/logs/{task}", "severity": "ERROR", "timestamp": ts,
         "resource": {"type": "ml_job", "labels": {"job_id": "1", "task_name": task}}, "textPayload": text}
    e.update(over)
    return e


@pytest.fixture
def export(tmp_path):
    d = tmp_path / "vertex"
    d.mkdir()
    good = [entry(0, "2024-11-05T12:00:01.123456789Z", C10.format(r=0, s=1)),
            entry(1, "2024-11-05T13:00:02+01:00", C10.format(r=1, s=2), task="workerpool0-1"),
            entry(2, "2024-11-05T12:00:03", "[2024-11-05 12:00:03] node1:1:1 [0] transport/net_ib.cc:1295 NCCL WARN "
                  "NET/IB : Got completion from peer 10.0.0.1<4441> with error 12, opcode 0, len 0, vendor err 129 "
                  "(Recv)")]
    odd = [entry(3, 12345, C10.format(r=2, s=3), resource=None),
           entry(4, None, C10.format(r=3, s=4), textPayload={"message": "x"}, jsonPayload={"message": ["x"]}),
           entry(5, ["2024"], C10.format(r=4, s=5), resource={"labels": [1]}),
           entry(6, "2024-11-05T12:00:06Z", C10.format(r=5, s=6), resource={"labels": {"task_name": 5}}),
           entry(7, "2024-11-05T12:00:07Z", C10.format(r=6, s=7), labels={"task_name": {"a": 1}}, severity=5)]
    (d / "export.json").write_text("".join(json.dumps(e) + "\n" for e in good + odd))
    (d / "local.log").write_text("[2024-11-05 12:00:00,123] torch.distributed.elastic.agent: [WARNING] start\n"
                                 "2024-11-05T14:00:00.5+02:00 train.py: RuntimeError: NCCL communicator was aborted "
                                 "on rank 1.\n")
    return d


@pytest.mark.parametrize("cmd", [["scan", "--json"], ["nccl"], ["ask", "--json", "--offline"]])
def test_mixed_zones_and_odd_types_are_read(export, cmd, cli_env):
    res = run_cli([*cmd, export], env=cli_env, timeout=60)
    assert_clean(res, rc_in=(0,), max_rss_mb=600, max_s=30)
    if cmd[0] == "scan":
        d = json.loads(res.stdout)
        ranks = {r for g in d["rank_groups"] for r in parse_rank_set(g["ranks"])}
        assert {0, 1, 2, 4, 5, 6} <= ranks  # the entries with odd types were read too (3's text is an object)
        assert any("read as UTC" in n for n in d["notes"])
    if cmd[0] == "ask":
        assert any("read as UTC" in n for n in json.loads(res.stdout)["notes"])


def test_one_rule_for_naive_and_aware():
    z, naive, off = (parse_stamp(s) for s in ("2024-11-05T12:00:01Z", "2024-11-05 12:00:01",
                                              "2024-11-05T13:00:01+01:00"))
    assert naive.utc_offset_min is None and z.utc_offset_min == 0
    assert z.job_seconds() == naive.job_seconds() == off.job_seconds()  # naive counts as UTC, offsets are applied
    a, b = z.to_datetime(), naive.to_datetime(assume_utc=True)
    assert a == b == off.to_datetime() and b.tzinfo is not None
    assert naive.to_datetime().tzinfo is None  # without the rule nothing is assumed
    assert "read as UTC" in mixed_zone_note([z, naive, None])
    assert mixed_zone_note([z, off]) is None and mixed_zone_note([naive]) is None

"""tools/scan/nearby.py: the remembered time and rank of the lines near a hit, and the time an untimed hit line
may borrow from its neighbours."""

from __future__ import annotations


def test_remembered_times_and_ranks_are_the_parsers_and_stay_bounded():
    """The file pass remembers a line's time and rank (lines near a crash are read several times): the answer is
    the parser's for every line, long lines are parsed and not kept, and the memory holds at most MEMO lines."""
    from trainlog_debugger.tools.lines.timestamps import parse_stamp
    from trainlog_debugger.tools.scan import nearby
    from trainlog_debugger.tools.scan.labels import bounded_attribution

    nearby.forget_lines()
    lines = [f"[rank{r}]:[E1105 03:13:{r % 60:02d}.000134623 ProcessGroupNCCL.cpp:616] [Rank {r}] timeout"
             for r in range(nearby.MEMO + 50)]
    lines += ["frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96", "[default3]:no time here",
              "x" * (nearby.MEMO_CHARS + 1) + " 2024-11-05 03:00:00,123"]
    for _ in range(2):
        for line in lines[-60:] + lines[:5]:
            assert nearby.stamp(line) == parse_stamp(line)
            assert nearby.line_rank(line) == bounded_attribution(line).rank
    for line in lines:
        nearby.stamp(line), nearby.line_rank(line)
    # a line that opens with c10's `[rankN]:` is N without attributing it: its rank is never kept
    assert nearby._stamps.cache_info().currsize == nearby.MEMO and nearby._ranks.cache_info().currsize < 5
    plain = [f"2024-11-05 03:13:00 worker {r}: [Rank {r}] timeout" for r in range(nearby.MEMO + 50)]
    for line in plain:
        assert nearby.line_rank(line) == bounded_attribution(line).rank
    assert nearby._ranks.cache_info().currsize == nearby.MEMO
    assert nearby.stamp(lines[-1]) is not None  # the long line: parsed, never kept
    assert nearby._stamps.cache_info().currsize == nearby.MEMO
    nearby.forget_lines()
    assert nearby._stamps.cache_info().currsize == nearby._ranks.cache_info().currsize == 0


def test_a_remembered_forward_search_answers_as_a_fresh_one():
    from trainlog_debugger.tools.scan.nearby import next_stamp
    """nearby.next_stamp with the buffer's memo (`seen`) answers every search exactly as a fresh search does: a
    per-node file's tail where each rank's abort text is untimed, interleaved with the other ranks' lines, some timed,
    searched in the order the scan meets them (increasing offsets)."""
    lines = []
    for i in range(60):
        r = i % 4
        if i % 5 == 0:
            lines.append(f"[rank{r}]:[E1105 03:35:{10 + i // 10:02d}.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] "
                         f"Watchdog caught collective operation timeout")
        else:
            lines.append(f"[default{r}]:terminate called after throwing an instance of 'c10::DistBackendError'")
        if i == 30:
            lines.append("[rank2]:2024-11-05 03:35:40,000 - INFO - step 7")
    buf = ("\n".join(lines) + "\n").encode()
    ends = [i for i, b in enumerate(buf) if b == 10]
    for rank in (0, 1, 2, 3, None):
        seen: dict = {}
        for end in ends:
            assert next_stamp(buf, end, rank, seen) == next_stamp(buf, end, rank), (rank, end)

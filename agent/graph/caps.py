"""How much of each report the model is given: every cap of the first message and of the tool results, named once.

Why one module: a cap is a decision about what the model may miss ("40 ranks with matches, the rest counted"), and
such decisions were literal slices spread over a dozen lines of the tools, some saying what they cut and most not.
Named here, a reviewer sees them all at once, a test can shrink one, and `take` makes every cut say what it cut
(STYLE habit 5: "showing 20 of 512 ranks"). The last word is the token cap: a result that is still too long after
these is cut to TOOL_RESULT_TOKENS on a line boundary, and says so (agent/graph/toolbox.py).

The sizes come from what one answer needs, not from the bundle: a hang is told by a handful of rank rows and their
lines, and at 4,096 ranks the ranks that differ are listed by the reports in range form (`0-4095`), so a cap on
rows keeps the outliers and counts the rest.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")

TOOL_RESULT_TOKENS = 3000  # one tool result as the model sees it (cl100k tokens): ~12 rounds stay near 150k tokens

# time: a tool call is an answer within seconds or an error the model can act on, never a hang
TOOL_SECONDS = 60.0           # wall clock of any one tool call (a rank diff of 4,096 ranks takes ~20 s on 2 cores)
REGEX_SECONDS = 8.0           # a call that runs the model's regex (grep, lines, histogram): in a child, then killed

# the first message: the deterministic answer, its chain and the lines each finding cites
BRIEF_CHAIN = 8               # findings of the chain, trigger first
BRIEF_LINES = 3               # cited lines per finding
BRIEF_LINE_CHARS = 300        # of each cited line (redacted whole first: a secret cut in half is not recognisable)
BRIEF_ALTERNATIVES = 4
BRIEF_ALTERNATIVE_CHARS = 120
BRIEF_MISSING = 4             # "missing evidence" items

# the tools
OVERVIEW_NODES = 64
STOP_RANKS = 64               # where_ranks_stop's default
STOP_RANKS_MAX = 512          # ... and the most it lists whatever the model asks
GREP_PATTERN_CHARS = 300
GREP_RANKS = 40               # ranks listed with their lines per page (offset/limit); the rest are counted
GREP_RANKS_MAX = 200
LINES_PER_RANK = 3            # grep lines per rank
GREP_UNRANKED = 6             # grep lines that no rank printed
WINDOW_CONTEXT = 15           # read_lines' default lines before and after
WINDOW_LINES = 60             # read_lines' most lines, whatever the model asks
NCCL_ROWS = 40                # collapsed rank rows (identical ranks share a row)
NCCL_GROUPS = 16              # process groups
NCCL_CULPRITS = 8             # culprit ranks whose own lines are quoted
LINES_PER_CULPRIT = 2         # state lines per culprit (besides its crash and last line)
STEP_OUTLIERS = 20
STEP_REGRESSIONS = 5
NOTES = 5                     # a report's notes
STORAGE_CHAIN = 8             # findings of the storage chain
LINES_PER_FINDING = 3
STORAGE_GAPS = 5
DIFF_TEMPLATES = 15           # rank_diff templates per kind (only a few ranks print it / only a few lack it)
EXPLAIN_CHARS = 4096          # of the line explain_line looks up
EXPLAIN_MATCHES = 5           # upstream templates that match it
LINES = 40                    # lines(): lines per page
LINES_MAX = 200
LINE_CHARS = 400              # of one line in lines() (the rest is a read_lines away)
LINES_SCANNED = 2_000_000     # lines() and histogram() stop reading past this many lines, and say so
HISTOGRAM_BUCKETS = 48        # histogram(): buckets shown (the busiest span when more)
PAGE = 40                     # rows per page of the listing tools (files, rank_map, scan_hits, records, stacks)
PAGE_MAX = 200
FR_ENTRIES = 20               # flight_recorder(): entries of one collective, one per rank


def page(items: Sequence[T], offset: int, limit: int, what: str, cut: list[str]) -> list[T]:
    """Items `offset`..`offset+limit`; when that leaves some out, says which were shown and how to see the others
    ("showing 41-80 of 512 ranks with matches; the next page: offset=80"), so that the model pages instead of
    asking the same question again."""
    n, offset = len(items), max(0, offset)
    got = list(items[offset:offset + limit])
    if offset or len(got) < n:
        shown = f"{offset + 1}-{offset + len(got)}" if got else "none"
        nxt = f"; the next page: offset={offset + len(got)}" if offset + len(got) < n else ""
        cut.append(f"showing {shown} of {n} {what}{nxt}")
    return got


def take(items: Sequence[T], cap: int, what: str, cut: list[str]) -> list[T]:
    """The first `cap` items; when that leaves some out, "showing CAP of N WHAT" is appended to `cut` (the
    result's list of what was cut, which the model sees beside the data)."""
    if len(items) > cap:
        cut.append(f"showing {cap} of {len(items)} {what}")
    return list(items[:cap])

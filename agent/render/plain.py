"""The words every output format says the same way, without rich: a cited line (`file:line`), a cut text, and the
phrases of a Diagnosis (the verdict line, the culprit, the job, when it ran, which ranks were read, why an answer is
inconclusive, a storage daemon's time on the workers' clock).

Why a module of its own: the terminal report (rich), the Markdown post-mortem, the HTML page and Slack's Block Kit
all print these phrases, and the Slack bot must not load rich (a terminal library; tests/test_layers.py rule
`i_slack_no_rich`). When the phrases lived beside the rich renderer, importing `to_markdown` for Slack pulled rich
in. So: what is said lives here, how a terminal styles it stays in report.py and text.py.

A verdict line reads, for every format alike:
    HUNG  data_loading_stall  culprit: rank 5; node gpu-17  confidence: high
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.lines.isotime import duration, human_time, shift_iso
from trainlog_debugger.tools.model import Diagnosis, Evidence
from trainlog_debugger.tools.ranks import ranks_str

MAX_TEXT = 160
DAEMON_KINDS = ("ais_target", "ais_proxy")
# what a terminal would act on: C0 controls but tab and newline, DEL, the C1 controls (U+0080-U+009F: 8-bit CSI/OSC)
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with every control character a terminal would act on shown instead (ESC as `␛`, BEL as `␇`, other
    C0 as their Unicode control pictures, DEL as `␡`, C1 as `\x9b`): a log line cannot clear the screen, set the
    title, write the clipboard or swallow the rest of the output (issue 30). Tab and newline are kept."""
    return UNSAFE.sub(_picture, text)


def _picture(m: re.Match) -> str:
    c = ord(m.group(0))
    if c < 0x20:
        return chr(0x2400 + c)
    return "␡" if c == 0x7F else f"\\x{c:02x}"


def short(text: str, n: int = MAX_TEXT) -> str:
    """`text` in at most `n` characters, the cut marked `…`; a carriage return shown as ␍ (a raw one would send the
    terminal's cursor back over the line)."""
    text = text.replace("\r", "␍")
    return text if len(text) <= n else text[: n - 1] + "…"


def cite(ev: Evidence | None) -> str:
    return ev.cite() if ev else "-"


def culprit(d: Diagnosis) -> str:
    parts = []
    if d.culprit_ranks:
        parts.append(f"rank{'s' if len(d.culprit_ranks) > 1 else ''} {ranks_str(d.culprit_ranks)}")
    hosts = [n for n in d.culprit_nodes if not _AIS_DAEMON.match(n)]
    daemons = [n for n in d.culprit_nodes if _AIS_DAEMON.match(n)]
    if hosts:
        parts.append(f"node{'s' if len(hosts) > 1 else ''} {', '.join(hosts[:6])}")
    if daemons:  # AIStore names its daemons t[ID] (target) and p[ID] (proxy): a storage daemon, not a node
        kind = "storage target" if all(n.startswith("t") for n in daemons) else "storage daemon"
        parts.append(f"{kind}{'s' if len(daemons) > 1 else ''} {', '.join(daemons[:6])}")
    return "; ".join(parts) or "no single culprit"


_AIS_DAEMON = re.compile(r"^[tp]\[[A-Za-z0-9_-]{1,64}\]$")


def verdict_line(d: Diagnosis) -> str:
    """The one-line verdict, printed first and again last: status, category, culprit, confidence."""
    line = f"{d.status.value.upper()}  {d.category}  culprit: {culprit(d)}  confidence: {d.confidence}"
    if d.agent is not None and d.agent.outcome == "answered" and d.agent.verdict:
        v = d.agent.verdict
        if v.get("category") != d.category or sorted(v.get("culprit_ranks") or []) != sorted(d.culprit_ranks):
            line += (f"  (agent: {v.get('category')}, culprit {ranks_str(v.get('culprit_ranks') or []) or 'none'})")
    if d.agent is not None and d.agent.unconfirmed:  # refused by the verifier: beside the verdict, never in its place
        u = d.agent.unconfirmed
        line += (f"  (agent, unconfirmed: {u.get('status')} {u.get('category')}, culprit "
                 f"{ranks_str(u.get('culprit_ranks') or []) or 'none'})")
    return line


def why_inconclusive(d: Diagnosis) -> str | None:
    """One sentence for an inconclusive answer: what the strongest lead is and what would decide it."""
    if d.status.value != "inconclusive":
        return None
    lead = d.chain[0].summary if d.chain else "no line in the bundle points at a cause"
    out = f"the strongest lead is not decisive ({short(lead, 100)})"
    if d.missing:
        out += f"; what would decide it: {d.missing[0]}"
    return out


def ranks_line(d: Diagnosis) -> str | None:
    cov = d.coverage
    if not (cov.expected_ranks or cov.seen_ranks):
        return None
    if not cov.seen_ranks:
        return f"ranks: no line names a rank ({cov.expected_ranks} expected)"
    of = (f"at least {cov.expected_ranks} (highest rank seen)" if cov.expected_from == "max rank seen"
          else f"{cov.expected_ranks or '?'}")  # an inferred figure says so where it is printed
    return (f"ranks: {len(cov.seen_ranks)} of {of} checked"
            + (f"; no log for {ranks_str(cov.missing_ranks)}" if cov.missing_ranks else ""))


def when(d: Diagnosis) -> str | None:
    """Start → end on one clock: when either stamp lacks the year, neither shows it."""
    j = d.job
    if not (j.start or j.end):
        return None
    a, b = j.start, j.end
    if a and b and (a.startswith("--") or b.startswith("--")):
        a, b = ("-" + x[4:] if x[:4].isdigit() else x for x in (a, b))
    if not (a and b) or human_time(a) == human_time(b):
        return human_time(a or b)
    span = duration(a, b)
    return f"{human_time(a)} → {human_time(b)}" + (f" ({span})" if span else "")


def job(d: Diagnosis) -> str:
    """The job in a phrase. A rank count the logs do not state (only the highest rank seen) says so: `at least 6
    ranks (highest rank seen)`, never `6 ranks` as a fact (issue 29)."""
    j = d.job
    inferred = d.coverage.expected_from == "max rank seen"
    n = f"{j.ranks} rank{'s' if j.ranks != 1 else ''}"
    placed = (f"at least {n} (highest rank seen)" if inferred else n) if j.ranks else None
    if placed and j.nodes:
        placed += f" on {j.nodes} node{'s' if j.nodes > 1 else ''}" + (f" ({j.ranks_per_node} per node)"
                                                                      if j.ranks_per_node and not inferred else "")
    bits = [j.framework, j.launcher, placed, "resumed from a checkpoint" if j.resumed_from_checkpoint else None]
    return ", ".join(b for b in bits if b) or "unknown"


def clock_time(iso: str | None, kind: str | None, d: Diagnosis) -> str:
    """One clock per report: a storage daemon's time is shown on the workers' clock, shifted by the offset the
    clock anchoring found, and marked † (see clock_note); every other time as it was logged."""
    if not iso:
        return "-"
    off = d.job.daemon_clock_offset_s
    if kind in DAEMON_KINDS and off is not None:
        shifted = shift_iso(iso, -off)
        if shifted:
            return human_time(shifted) + " †"
    return human_time(iso)


def clock_note(d: Diagnosis) -> str | None:
    off = d.job.daemon_clock_offset_s
    if off is None:
        return None
    sign = "−" if off >= 0 else "+"
    a = abs(int(round(off)))
    return (f"† AIStore daemon time shown on the workers' clock (daemon {sign} {a // 3600} h {a % 3600 // 60:02d} min, "
            f"from clock anchoring: {d.job.daemon_clock_basis})")

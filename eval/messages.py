"""Check or extend a message table (tools/sources/messages) against a checkout of its upstream.

    python -m trainlog_debugger.eval.messages check TABLE.yaml --upstream PATH [--window N] [--fix]
    python -m trainlog_debugger.eval.messages candidates TABLE.yaml --upstream PATH
    python -m trainlog_debugger.eval.messages stats [TABLE.yaml ...]
    python -m trainlog_debugger.eval.messages scanlist [--check]

Why: a table is only as good as its citations. When NCCL or PyTorch ships a release, `check` says which entries
still sit where they are cited (ok), which moved within their file (moved: the new line, rewritten with --fix),
and which are gone (missing: the message changed or was removed: re-read it). `candidates` lists the call sites
the table's `extract` rules find in the checkout that no entry covers yet: what a new release added, to classify.
`scanlist` writes tools/sources/upstream.py: the table triggers whose lines no catalog pattern finds (a Megatron
walltime exit, a Kubernetes pod reason), as scan patterns, so that the scan keeps them for the diagnosis to read;
`--check` only says whether the file is current (tests run it).
Exit codes: 0 all ok, 1 an entry is missing (check) or a call site is uncovered (candidates), 2 bad input.
"""

from __future__ import annotations

import argparse
import codecs
import re
import sys
from collections import Counter
from pathlib import Path

from trainlog_debugger.tools.sources.messages.catalog import (HERE, LEXICON, LOAD_ERRORS, Message, TableError, pieces,
                                                          read_table)

WINDOW = 60  # lines around the cited line where the message's text still counts as "at its place"


def _unescape(s: str) -> str:
    try:
        return codecs.decode(s, "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return s


def _probe(m: Message) -> str:
    """The text that must appear in the cited source file: the template's longest literal chunk, shortened to
    its longest run without quotes or backslashes (a source file escapes those) and at most 40 characters (a long
    message is often split over string literals)."""
    best = max((p for p in pieces(m.template, m.syntax) if p.strip()), key=len, default="")
    runs = re.split(r"[\"\\\n]", best)
    run = max(runs, key=len, default="").strip()
    if len(run) > 40:
        run = run[:40].rstrip()
    return run


# adjacent string literals that a source splits over lines (`"NET/IB : Attempted to connect "\n  "incompatible..."`,
# `"... " PRIu64 " ..."`): joined before a message is looked for, as the compiler joins them
_JOIN = re.compile(r'"\s*(?:\\?\n\s*)?(?:[A-Z][A-Z0-9_]*\s*)?"|\\\n\s*')
SPAN = 4  # lines a split message may span


def _at(text_lines: list[str], i: int) -> str:
    """Line i (0-based) with the SPAN - 1 lines after it, literals joined."""
    return _JOIN.sub("", "\n".join(text_lines[i:i + SPAN]))


def _locate(text_lines: list[str], probe: str, line: int, window: int) -> tuple[str, int | None]:
    if not probe:
        return "unchecked", None
    near = range(max(0, line - 1 - window), min(len(text_lines), line + window))
    for i in (line - 1, line - 2, line - 3):  # the cited line, or the message's text starts a line or two above
        if 0 <= i < len(text_lines) and probe in _at(text_lines, i):
            return "ok", line
    hits = [i + 1 for i, t in enumerate(text_lines) if probe in t]
    if not hits:
        hits = [i + 1 for i in range(len(text_lines)) if probe[:12] in text_lines[i] and probe in _at(text_lines, i)]
    if not hits:
        return "missing", None
    close = [i for i in hits if i - 1 in near]
    if close:
        return "ok" if abs(close[0] - line) <= 3 else "moved", min(close, key=lambda i: abs(i - line))
    return "moved", min(hits, key=lambda i: abs(i - line))


def check(table: Path, upstream: Path, window: int = WINDOW, fix: bool = False, out=None) -> int:
    out = out or sys.stdout
    head, msgs = read_table(table)
    counts: Counter = Counter()
    moves: dict[str, str] = {}
    cache: dict[str, list[str] | None] = {}
    for m in msgs:
        path, _, num = m.source.rpartition(":")
        if not path or not num.isdigit():
            path, num = m.source, "0"
        if path not in cache:
            f = upstream / path
            try:
                cache[path] = f.read_text(encoding="utf-8", errors="replace").splitlines() if f.is_file() else None
            except OSError:
                cache[path] = None
        lines = cache[path]
        if lines is None:
            counts["missing"] += 1
            print(f"missing  {m.source}: no such file  | {m.template[:90]}", file=out)
            continue
        state, at = _locate(lines, _probe(m), int(num), window)
        counts[state] += 1
        if state == "moved" and at is not None:
            moves[m.source] = f"{path}:{at}"
            print(f"moved    {m.source} -> {path}:{at}  | {m.template[:90]}", file=out)
        elif state != "ok":
            print(f"{state:8} {m.source}  | {m.template[:90]}", file=out)
    print(f"{table.name}: {len(msgs)} entries, " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=out)
    if fix and moves:
        text = table.read_text(encoding="utf-8")
        for old, new in moves.items():
            text = re.sub(rf"(\n\s*(?:-\s+)?source:\s*['\"]?){re.escape(old)}(['\"]?\s*\n)", rf"\g<1>{new}\g<2>", text)
        table.write_text(text, encoding="utf-8")
        print(f"rewrote {len(moves)} source line(s)", file=out)
    return 1 if counts["missing"] else 0


def candidates(table: Path, upstream: Path, out=None) -> int:
    out = out or sys.stdout
    head, msgs = read_table(table)
    ex = head.get("extract") or {}
    globs, calls = ex.get("files") or [], ex.get("calls") or []
    if not globs or not calls:
        print(f"{table.name}: no extract rules (files, calls) in its header", file=out)
        return 2
    rxs = [re.compile(c) for c in calls]
    known = [(_probe(m), m) for m in msgs]
    seen: set[str] = set()
    missing = 0
    files = sorted({p for g in globs for p in upstream.glob(g) if p.is_file()})
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for rx in rxs:
            for mt in rx.finditer(text):
                tpl = _unescape(mt.group(1))
                if tpl in seen:
                    continue
                seen.add(tpl)
                if any(p and p in tpl for p, _m in known):
                    continue
                missing += 1
                line = text.count("\n", 0, mt.start()) + 1
                print(f"{f.relative_to(upstream)}:{line}  {tpl[:160]}", file=out)
    print(f"{table.name}: {len(seen)} call sites, {len(seen) - missing} covered, {missing} not in the table", file=out)
    return 1 if missing else 0


def stats(tables: list[Path], out=None) -> int:
    out = out or sys.stdout
    total = 0
    for t in tables:
        head, msgs = read_table(t)
        total += len(msgs)
        roles = Counter(m.role for m in msgs)
        cats = Counter(m.category or "-" for m in msgs)
        print(f"{head.get('upstream', t.stem):14} {len(msgs):5}  {head.get('version', '')}  roles: "
              + ", ".join(f"{k} {v}" for k, v in roles.most_common()) + "  categories: "
              + ", ".join(f"{k} {v}" for k, v in cats.most_common()), file=out)
    print(f"total {total}", file=out)
    return 0


SCANLIST = Path(__file__).resolve().parent.parent / "tools" / "sources" / "upstream.py"
_SCANLIST_HEAD = '''"""GENERATED by `python -m trainlog_debugger.eval.messages scanlist` from the message tables (tools/sources/messages):
do not edit. The table triggers whose lines no other catalog pattern finds (they carry no failure word, or no pattern
knows their wording), as scan patterns: the scan keeps their lines and tools/rules/meaning.py reads them with the
tables. Each is the entry's longest literal (the engine's trigger) confirmed by the entry's own regex, a fallback, so
that a specific pattern on the same line wins.
"""

from trainlog_debugger.tools.sources.pattern import P

PATTERNS = [
'''


def scanlist_text() -> str:
    """The source of tools/sources/upstream.py for the tables as they are now."""
    from trainlog_debugger.tools.scan.engine import ReEngine
    from trainlog_debugger.tools.sources import patterns
    from trainlog_debugger.tools.sources.messages.catalog import messages, required_literals, template_regex

    pats = [p for p in patterns() if not p.id.startswith("upstream.")]
    eng = ReEngine(pats)

    def found(line: str) -> bool:
        return any(s == 0 and pats[i].match(line) for s, i in eng.candidates(line.encode()))

    # the entries of one message that a table splits by regex (glibc's `version `%s' not found`: GLIBC_, GLIBCXX_,
    # anything else): one pattern keeps the lines of all of them, on the template's literal, when any of them is a
    # line no other pattern finds (one variant's example being found said nothing of the others' lines)
    variants: dict[tuple, list] = {}
    for m in messages():
        if m.role == "trigger" and not m.weak:
            variants.setdefault((m.table, m.source, m.template), []).append(m)
    rows, taken, done = [], [], set()
    for m in sorted(messages(), key=lambda m: (m.table, m.source, m.template)):
        key = (m.table, m.source, m.template)
        if m.role != "trigger" or m.weak or key in done:
            continue
        group = variants[key]
        if len({v.regex for v in group}) > 1:
            done.add(key)
            lost = [v for v in group if not found(v.example)]
            if not lost:
                continue
            rx = "|".join(f"(?:{v.regex or template_regex(v.template, v.syntax)})" for v in group)
            lits, m = (m.anchor,), lost[0]
        elif found(m.example):
            continue
        else:
            rx = m.regex or template_regex(m.template, m.syntax)
            lits = (m.anchor,) if m.regex is None else required_literals(m.regex)
        if not lits or any(re.compile(t).search(m.example) for t in taken):
            continue  # no literal to scan for, or another generated pattern already keeps this line
        trig = "|".join(re.escape(a) for a in lits)
        taken.append(rx)
        pid = "upstream." + re.sub(r"\W", "_", m.table).lower() + "_" + m.id.rsplit(".", 1)[1]
        rows.append(f"    P({pid!r}, 3, {m.category!r}, \"root_candidate\",\n"
                    f"      {trig!r}, {tuple(lits)!r},\n"
                    f"      {m.example!r},\n"
                    f"      {m.meaning[:160]!r}, fallback=True, verify={rx!r}),\n")
    return _SCANLIST_HEAD + "".join(rows) + "]\n"


def scanlist(check_only: bool = False, out=None) -> int:
    out = out or sys.stdout
    text = scanlist_text()
    if LOAD_ERRORS:  # a table that does not read would silently drop its triggers from the scan
        for e in LOAD_ERRORS:
            print(f"error: {e}", file=sys.stderr)
        return 2
    current = SCANLIST.read_text(encoding="utf-8") if SCANLIST.is_file() else ""
    if check_only:
        ok = text == current
        print(f"{SCANLIST.name}: {'current' if ok else 'OUT OF DATE: run scanlist'}", file=out)
        return 0 if ok else 1
    SCANLIST.write_text(text, encoding="utf-8")
    print(f"wrote {SCANLIST} ({text.count('    P(')} patterns)", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainlog_debugger.eval.messages", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("check", "candidates"):
        s = sub.add_parser(name)
        s.add_argument("table", type=Path)
        s.add_argument("--upstream", type=Path, required=True, help="a checkout of the table's upstream")
        if name == "check":
            s.add_argument("--window", type=int, default=WINDOW)
            s.add_argument("--fix", action="store_true", help="rewrite the source of entries that moved")
    s = sub.add_parser("stats")
    s.add_argument("tables", type=Path, nargs="*")
    s = sub.add_parser("scanlist")
    s.add_argument("--check", action="store_true", help="exit 1 when tools/sources/upstream.py is not current")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "scanlist":
            return scanlist(a.check)
        if a.cmd == "stats":
            return stats(a.tables or sorted(p for p in HERE.glob("*.yaml") if p != LEXICON))
        if not a.upstream.is_dir():
            print(f"error: not a directory: {a.upstream}", file=sys.stderr)
            return 2
        if a.cmd == "check":
            return check(a.table, a.upstream, a.window, a.fix)
        return candidates(a.table, a.upstream)
    except TableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

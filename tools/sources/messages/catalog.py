"""Loading and matching the message tables (the format is in this package's docstring) and the lexicon."""


from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEXICON = HERE / "lexicon.yaml"
ROLES = ("trigger", "cascade", "noise", "context")
SYNTAXES = ("printf", "brace", "literal")
FIELDS = ("template", "source", "level", "category", "role", "meaning", "action", "example", "regex", "name", "number",
          "status", "lead")
STATUSES = ("crashed", "hung", "slow", "cancelled")  # what a job whose trigger is this line did (default crashed)
MIN_LITERAL = 8   # a template with less literal text than this (all chunks together) is too vague to name a line
MIN_ANCHOR = 5    # and its longest literal chunk must be at least this long: the engine's anchor
MAX_LINE = 4096   # characters of a line looked at (a template's text sits near its start)

# printf conversions: flags, width, precision, length, conversion (PRIu64 and friends written as %lu in tables)
_PRINTF = re.compile(r"%(?:[-+ #0']*)(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t|q|I64|I32)?[diouxXfFeEgGaAcspnm]")
_BRACE = re.compile(r"\{[^{}]*\}")
_HOLE = "\0"


class TableError(ValueError):
    """A table that cannot be read or that breaks the format: names the table and the entry."""


def pieces(template: str, syntax: str) -> list[str]:
    """The template's literal text between placeholders (the first printed line only: a message that prints
    several lines is one entry per line that matters). `%%` and `{{ }}` are their literal characters."""
    t = template.split("\n", 1)[0].rstrip()
    if syntax == "printf":
        t = _PRINTF.sub(_HOLE, t.replace("%%", "\1")).replace("\1", "%")
    elif syntax == "brace":
        t = _BRACE.sub(_HOLE, t.replace("{{", "\1").replace("}}", "\2")).replace("\1", "{").replace("\2", "}")
    elif syntax != "literal":
        raise TableError(f"unknown syntax {syntax!r}")
    return t.split(_HOLE)


def template_regex(template: str, syntax: str, hole: str = ".*?") -> str:
    """A Python regex for the printed line: the literal pieces in order, `hole` (anything) between them. Runs of
    spaces in the template match one or more spaces (padding widths differ between releases)."""
    parts = []
    for p in pieces(template, syntax):
        parts.append(r"\s+".join(re.escape(w) for w in re.split(r" {2,}", p)) if p else "")
    return hole.join(parts)


@dataclass(frozen=True)
class Message:
    table: str
    version: str
    template: str
    source: str
    category: str | None
    role: str
    meaning: str
    action: str
    example: str
    level: str = ""
    regex: str | None = None
    name: str = ""
    number: str = ""
    syntax: str = "literal"
    status: str = "crashed"
    # a class of failures whose cause the line does not say (NCCL's `unhandled system error`: a socket, /dev/shm,
    # ibverbs or NVML call): its category is the likeliest, read as a lead (below a decisive reading), never a verdict
    lead: bool = False

    @cached_property
    def id(self) -> str:
        """Stable while the entry is: its table, source, template and (for an entry that reads one call site's
        arguments, e.g. which ibverbs call failed with which errno) its regex."""
        key = self.source + self.template + (self.regex or "")
        return f"{self.table}.{hashlib.sha1(key.encode()).hexdigest()[:8]}"

    @cached_property
    def literal(self) -> list[str]:
        return [p for p in pieces(self.template, self.syntax) if p.strip()]

    @cached_property
    def specificity(self) -> int:
        """How much literal text the template pins down: the more, the more specific a match is. An entry with its
        own regex pins down at least the literals every match of that regex holds (an entry for one argument of a
        generic call site outranks the call site's template)."""
        own = sum(len(p.strip()) for p in self.literal)
        lits = required_literals(self.regex) if self.regex else None
        return max(own, min((len(x) for x in lits), default=0) if lits else 0)

    @cached_property
    def anchor(self) -> str:
        """The longest literal chunk: every line the template prints contains it."""
        return max(self.literal, key=len, default="")

    @property
    def weak(self) -> bool:
        """Too little literal text to name a line (`%s: %s`): kept in the table, never matched by template."""
        return self.regex is None and (self.specificity < MIN_LITERAL or len(self.anchor) < MIN_ANCHOR)

    @cached_property
    def rx(self) -> re.Pattern:
        """Compiled on first use: a diagnosis confirms a few dozen entries, and compiling all 2,800 took 1.7 s a
        run. A regex that does not compile never matches here (read_table(check=True), which the tests run on
        every shipped table, names it)."""
        try:
            return re.compile(self.regex or template_regex(self.template, self.syntax))
        except re.error:
            return re.compile(r"(?!)")

    def matches(self, text: str) -> bool:
        return not self.weak and self.rx.search(text[:MAX_LINE]) is not None

    def cite(self) -> str:
        """Where the message comes from, as a reader can check it: `NVIDIA/nccl v2.27.7-1 src/x.cc:120`."""
        return f"{self.table} {self.version} {self.source}".strip()


def _entry(table: str, version: str, syntax: str, raw: dict, i: int, check: bool = True) -> Message:
    from trainlog_debugger.tools.model import CATEGORIES

    where = f"{table} entry {i}"
    if not isinstance(raw, dict):
        raise TableError(f"{where}: not a mapping")
    unknown = set(raw) - set(FIELDS)
    if unknown:
        raise TableError(f"{where}: unknown field(s) {sorted(unknown)}")
    for k in ("template", "source", "role", "meaning", "action", "example"):
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise TableError(f"{where}: {k} is missing")
    cat = raw.get("category")
    if cat is not None and (cat not in CATEGORIES or cat == "none"):
        raise TableError(f"{where}: category {cat!r} is not a fault category")
    if raw["role"] not in ROLES:
        raise TableError(f"{where}: role {raw['role']!r} is not one of {ROLES}")
    if raw["role"] == "trigger" and cat is None:
        raise TableError(f"{where}: a trigger needs a category")
    if raw.get("lead") not in (None, True, False):
        raise TableError(f"{where}: lead must be true or false")
    if raw.get("status") is not None and raw["status"] not in STATUSES:
        raise TableError(f"{where}: status {raw['status']!r} is not one of {STATUSES}")
    if check:
        try:
            re.compile(raw.get("regex") or template_regex(raw["template"], syntax))
        except re.error as e:
            raise TableError(f"{where}: its regex does not compile ({e})") from None
    return Message(table=table, version=version, template=raw["template"], source=raw["source"].strip(),
                   category=cat, role=raw["role"], meaning=" ".join(raw["meaning"].split()),
                   action=" ".join(raw["action"].split()), example=raw["example"].rstrip("\n"),
                   level=str(raw.get("level") or ""), regex=raw.get("regex") or None, name=str(raw.get("name") or ""),
                   number=str(raw.get("number") if raw.get("number") is not None else ""), syntax=syntax,
                   status=raw.get("status") or "crashed", lead=bool(raw.get("lead")))


def _parsed(path: Path):
    """A table file's YAML as plain data. Parsing the 2.4 MB of shipped YAML takes ~0.7 s, paid by every process that
    diagnoses; the parse is kept as JSON in the user's cache, keyed by the file's bytes (as the compiled Hyperscan
    database is), and read back in milliseconds. The cache is ours: anything wrong with it means parsing again."""
    import hashlib
    import json
    import os

    import yaml

    raw = path.read_bytes()
    cache = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainlog-debugger"
             / f"table-{path.stem}-{hashlib.sha256(raw).hexdigest()[:20]}.json")
    try:
        return json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    data = yaml.load(raw.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, default=str), encoding="utf-8")
        os.replace(tmp, cache)
    except (OSError, TypeError, ValueError):
        pass
    return data


def read_table(path: Path, check: bool = True) -> tuple[dict, list[Message]]:
    """(header, messages) of one table file; TableError on any breach of the format. `check=False` (a diagnosis's
    load) leaves compiling each entry's regex to its first use (Message.rx): the format is still checked."""
    import yaml

    try:
        data = _parsed(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TableError(f"{path.name}: cannot read ({type(e).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise TableError(f"{path.name}: not a table (a mapping with a messages list)")
    table = str(data.get("upstream") or path.stem)
    syntax = str(data.get("syntax") or "literal")
    if syntax not in SYNTAXES:
        raise TableError(f"{path.name}: syntax {syntax!r} is not one of {SYNTAXES}")
    version = str(data.get("version") or "")
    head = {k: v for k, v in data.items() if k != "messages"}
    return head, [_entry(table, version, syntax, m, i, check) for i, m in enumerate(data["messages"])]


LOAD_ERRORS: list[str] = []  # tables that could not be read (a broken install): skipped, never a crash


@lru_cache(maxsize=1)
def tables() -> dict[str, tuple[Message, ...]]:
    """Every table shipped with the package, by file name (`nccl`, `kernel`, ...). A table that does not read is
    left out and named in LOAD_ERRORS (tests/sources/test_messages.py reads every one: a shipped table that breaks
    fails there, not in a user's diagnosis)."""
    out: dict[str, tuple[Message, ...]] = {}
    for path in sorted(HERE.glob("*.yaml")):
        if path == LEXICON:
            continue
        try:
            _head, msgs = read_table(path, check=False)
        except TableError as e:
            LOAD_ERRORS.append(str(e))
            continue
        out[path.stem] = tuple(msgs)
    return out


def messages() -> tuple[Message, ...]:
    return tuple(m for msgs in tables().values() for m in msgs)


_LITERALS: dict[str, list | None] = {}  # regex → its required literals, kept across processes (_save_literals)
_LITERALS_DIRTY = [False]


def _literals_file() -> Path:
    import os
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainlog-debugger" / "literals.json"


def _load_literals() -> None:
    """Reading 380 regexes' parse trees costs ~0.17 s a process; their literals are kept in the user's cache (a
    regex's literals are a function of its text alone, so the file can never be stale, only incomplete)."""
    import json
    if _LITERALS:
        return
    try:
        got = json.loads(_literals_file().read_text(encoding="utf-8"))
        if isinstance(got, dict):
            _LITERALS.update({k: v for k, v in got.items() if v is None or isinstance(v, list)})
    except (OSError, ValueError):
        pass


def _save_literals() -> None:
    import json
    import os
    if not _LITERALS_DIRTY[0]:
        return
    try:
        path = _literals_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_LITERALS), encoding="utf-8")
        os.replace(tmp, path)
        _LITERALS_DIRTY[0] = False
    except OSError:
        pass


def required_literals(regex: str, least: int = 4) -> tuple[str, ...] | None:
    """required_literals_of, remembered (in this process and in the user's cache) for the default `least`."""
    if least != 4:
        return required_literals_of(regex, least)
    _load_literals()
    if regex not in _LITERALS:
        got = required_literals_of(regex, least)
        _LITERALS[regex] = list(got) if got is not None else None
        _LITERALS_DIRTY[0] = True
    known = _LITERALS[regex]
    return tuple(known) if known is not None else None


def required_literals_of(regex: str, least: int = 4) -> tuple[str, ...] | None:
    """Literal strings such that every line the regex matches contains at least one of them (one per branch of a
    top-level alternation: the longest literal run of that branch), or None when some branch has no run of
    `least` characters or the regex ignores case. The pure-Python engine finds lines by these with `bytes.find`."""
    import re._constants as C
    import re._parser as sp

    try:
        tree = sp.parse(regex)
    except re.error:
        return None
    if tree.state.flags & C.SRE_FLAG_IGNORECASE:
        return None

    def branches(seq) -> list | None:
        items = list(seq)
        if len(items) == 1 and items[0][0] is C.BRANCH:
            out: list = []
            for b in items[0][1][1]:
                got = branches(b)
                if got is None:
                    return None
                out += got
            return out
        if len(items) == 1 and items[0][0] is C.SUBPATTERN:
            sub = items[0][1]
            if sub[1] & C.SRE_FLAG_IGNORECASE:  # add flags
                return None
            return branches(sub[-1])
        runs, cur = [], []
        for op, av in items:
            if op is C.LITERAL:
                cur.append(chr(av))
            else:
                runs.append("".join(cur))
                cur = []
                if op is C.SUBPATTERN and av[1] & C.SRE_FLAG_IGNORECASE:
                    continue
        runs.append("".join(cur))
        best = max(runs, key=len)
        return [best] if len(best) >= least else None

    got = branches(tree)
    return tuple(dict.fromkeys(got)) if got else None


class _Index:
    """The engine over every matchable entry (Hyperscan when installed), so that a batch of lines is classified in
    one pass over one buffer instead of 1,500 regexes a line. The engine looks for literals only (a template's
    longest literal chunk; for an entry with its own `regex`, the literals every match of it contains,
    required_literals), and each candidate line is confirmed with the entry's regex; the few entries whose regex
    has no such literal are searched line by line."""

    def __init__(self, msgs: tuple[Message, ...]):
        from trainlog_debugger.tools.scan.engine import make_engine
        from trainlog_debugger.tools.sources.pattern import P

        self.msgs: list[Message] = []
        self.slow: list[Message] = []
        pats = []
        for m in msgs:
            if m.weak:
                continue
            anchors = (m.anchor,) if m.regex is None else required_literals(m.regex)
            if anchors is None:
                self.slow.append(m)
                continue
            trig = "|".join(re.escape(a) for a in anchors)
            self.msgs.append(m)
            pats.append(P(m.id, 3, m.category, "context", trig, anchors, m.example, m.meaning))
        self.engine = make_engine(pats) if pats else None
        _save_literals()

    def match_many(self, lines: list[str]) -> list[list[Message]]:
        texts = [t[:MAX_LINE].replace("\n", " ").replace("\r", " ") for t in lines]
        found: list[list[Message]] = [[m for m in self.slow if m.rx.search(t)] for t in texts]
        if self.engine is None:
            return found
        buf = "\n".join(texts).encode("utf-8", "surrogateescape")
        starts, pos = {}, 0
        for i, t in enumerate(texts):
            starts[pos] = i
            pos += len(t.encode("utf-8", "surrogateescape")) + 1
        for start, idx in self.engine.candidates(buf):
            at = starts.get(start)
            if at is None:
                continue
            m = self.msgs[idx]
            if m.rx.search(texts[at]) is not None:
                found[at].append(m)
        for hits in found:
            hits.sort(key=lambda m: (-m.specificity, m.id))
        return found


@lru_cache(maxsize=1)
def _index() -> _Index:
    return _Index(messages())


def match_many(lines: list[str]) -> list[list[Message]]:
    """For each line, the entries whose template it contains, most specific first."""
    return _index().match_many(list(lines)) if lines else []


def match(text: str) -> list[Message]:
    return match_many([text])[0]


INNER_SPECIFIC = 12  # literal characters an entry must pin down to count as the error a wrapper quotes


@lru_cache(maxsize=4096)
def _holes_rx(template: str, syntax: str) -> tuple[re.Pattern, bool, bool]:
    """template_regex with each placeholder a group; whether the template starts, and ends, with a placeholder."""
    ps = pieces(template, syntax)
    return re.compile(template_regex(template, syntax, hole="(.*?)")), ps[0] == "", ps[-1] == ""


def _holes(m: Message, text: str) -> list[tuple[int, int]]:
    """Where in `text` the entry's placeholders sit (what the program filled in), for an entry read from its
    template; a trailing placeholder runs to the end of the line, a leading one is left out (it would take in the
    line's prefixes). [] where the template does not match the line (an entry with its own regex may print more
    than its template says)."""
    rx, open_start, open_end = _holes_rx(m.template, m.syntax)
    got = rx.search(text)
    if got is None or not rx.groups:
        return []
    spans = [got.span(i) for i in range(1, rx.groups + 1)]
    if open_end:
        spans[-1] = (spans[-1][0], len(text))
    return spans[1:] if open_start else spans


# an emitter's headers before its message: bracketed ones (`[W1108 ... socket.cpp:752] [c10d] `) and the standard
# library logging's default format `LEVEL:logger.name:` (logging.BASIC_FORMAT, `WARNING:verl.workers...engine:`)
_HEADERS = re.compile(r"(?:\[[^\]\n]*\]:?\s*|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.<>-]*:\s*)*")


def spans_whole(m: Message, text: str) -> bool:
    """Whether the entry's template is the whole message of the line: it matches after nothing but bracketed headers
    and runs to the end (a full stop aside), its placeholders taking what the program filled in. Such an entry speaks
    for the line however long the values it printed (an address and an errno), unlike a name it merely contains."""
    rx, _open_start, open_end = _holes_rx(m.template, m.syntax)
    got = rx.search(text)
    if got is None:
        return False
    tail = "" if open_end else text[got.end():].strip().rstrip(".")
    return not tail and _HEADERS.fullmatch(text[:got.start()]) is not None


def innermost(hits: list[Message], text: str) -> list[Message]:
    """The entries of a line without those that only wrap another's error: a trigger whose placeholder holds the
    whole match of a specific trigger of another category (PyTorch's `Unexpected error from cudaGetDeviceCount()
    ... Error {}: {}` around CUDA's `system not yet initialized`), or a context line whose placeholder holds one
    (NCCL/RCCL's `NET/Plugin : dlerror=%s No plugin found`, harmless when the plugin is simply not installed, around
    the loader's `version ... not found`). Why: a cause is read at its innermost error (TAXONOMY, step 1); the
    wrapper says where it surfaced, the error it quotes says what failed. Noise is never unwrapped: a retry that
    quotes its error and recovered is still noise."""
    triggers = [m for m in hits if m.role == "trigger" and m.category]
    reports = [m for m in hits if m.role == "context"]
    if len({m.category for m in triggers}) < 2 and not (triggers and reports):
        return hits
    spans = {}
    for m in triggers:
        if m.specificity >= INNER_SPECIFIC and (got := m.rx.search(text)) is not None:
            spans[m.id] = got.span()
    wrappers = set()
    for a in triggers + reports:
        holes = _holes(a, text)
        if holes and any(b.id != a.id and (a.role == "context" or b.category != a.category) and b.id in spans
                         and any(s <= spans[b.id][0] and spans[b.id][1] <= e for s, e in holes) for b in triggers):
            wrappers.add(a.id)
    return [m for m in hits if m.id not in wrappers] if wrappers else hits


def pick_best(hits: list[Message], text: str | None = None) -> Message | None:
    """The most specific of a line's entries (given the line's `text`: of those that do not only wrap another's
    error, see innermost); among equally specific ones a trigger before a cascade before the rest."""
    if not hits:
        return None
    if text is not None and len(hits) > 1:
        hits = innermost(hits, text)
    top = max(m.specificity for m in hits)
    order = {r: i for i, r in enumerate(ROLES)}
    return min((m for m in hits if m.specificity == top), key=lambda m: (order[m.role], m.id))


def best(text: str) -> Message | None:
    """The most specific entry for a line (pick_best of match)."""
    return pick_best(match(text), text)


# -- the lexicon: reading a line by its words -----------------------------------------------------------------
@lru_cache(maxsize=1)
def lexicon() -> tuple[tuple[str, re.Pattern, str, bool], ...]:
    """(category, compiled phrase, why, weak) rows of lexicon.yaml, in the file's order (first match wins). A weak
    row (a fourth field `weak`) names a subject, not a fault (`dataset`, `bucket`, `nan` in quotes): it reads an
    unknown line, never overrides another reading. A lexicon that does not read is empty and named in LOAD_ERRORS
    (tests/sources/test_messages.py reads it): no reading by words, never a crash."""
    import yaml

    from trainlog_debugger.tools.model import CATEGORIES

    try:
        rows = _parsed(LEXICON)["rows"]
        out = []
        for i, row in enumerate(rows):
            cat, phrase, why = row[:3]
            if cat not in CATEGORIES or cat == "none":
                raise TableError(f"lexicon row {i}: {cat!r} is not a fault category")
            out.append((cat, re.compile(rf"(?i)(?<!\w)(?:{phrase})(?!\w)"), why, row[3:4] == ["weak"]))
        return tuple(out)
    except (TableError, OSError, ValueError, TypeError, KeyError, IndexError, re.error, yaml.YAMLError) as e:
        LOAD_ERRORS.append(f"lexicon.yaml: {type(e).__name__}: {e}")
        return ()


def read_by_words(body: str, strong_only: bool = False) -> tuple[str, str, str] | None:
    """(category, the words that decided it, why) for a line's text, by the first lexicon row it contains (with
    `strong_only`, the first row that names a fault, not a subject); None when no row does."""
    for cat, rx, why, weak in lexicon():
        if weak and strong_only:
            continue
        m = rx.search(body[:MAX_LINE])
        if m:
            return cat, m.group(0), why
    return None

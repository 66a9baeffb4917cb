"""One agent session over one bundle: the model, the toolbox, the redaction, the history on disk, the fallbacks.

What the user must be able to trust: without a key, or when the API fails (unreachable, 401, 429, 529, overloaded),
they get one line naming what happened and the deterministic report, exit 0, and the report says the agent did not
run (`agent.outcome` offline / api_error). Secrets never reach the model: every text the model sees goes through
tools/redact.py first (and host names too with --redact-hosts; the user sees them unmasked).

History: a LangGraph SQLite checkpointer under the user's state directory (DEBUGGER_HOME, else
$XDG_STATE_HOME/trainlog-debugger, else ~/.local/state/trainlog-debugger), one thread per bundle (its absolute
paths, sizes and mtimes). It stores only what the model saw, i.e. redacted text. Nothing is written near the bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainlog_debugger.agent.llm import bounds as B
from trainlog_debugger.agent.llm import model as M
from trainlog_debugger.tools.model import AgentClaim, AgentSection, Diagnosis


@dataclass
class AgentOptions:
    model: str | None = None
    budget_tokens: int = 200_000
    max_rounds: int = 12
    redact_hosts: bool = False
    resume: bool = False
    history: bool = True  # keep the thread on disk (chat, --resume)


def state_dir() -> Path:
    if os.environ.get("DEBUGGER_HOME"):
        return Path(os.environ["DEBUGGER_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "trainlog-debugger"


def bundle_thread(paths) -> str:
    """A stable id for 'this bundle': the absolute paths with their sizes and mtimes (a rewritten log is another
    bundle)."""
    h = hashlib.sha256()
    for p in sorted(str(Path(x).resolve()) for x in paths):
        h.update(p.encode())
        try:
            st = os.stat(p)
            h.update(f"{st.st_size}:{int(st.st_mtime)}".encode())
        except OSError:
            pass
    return "bundle-" + h.hexdigest()[:20]


def offline_section(notice: str, outcome: str = "offline", model: str | None = None,
                    question: str | None = None) -> AgentSection:
    return AgentSection(model=M.model_name(model), outcome=outcome, notice=notice, question=question)


@dataclass
class Session:
    """The graph over one open bundle and its Investigation. `chat(question)` → the AgentSection of that answer."""

    bundle: object
    inv: object
    paths: list
    opts: AgentOptions = field(default_factory=AgentOptions)
    model: object = None  # a LangChain chat model; made from opts when None
    checkpointer: object = None

    def __post_init__(self):
        from trainlog_debugger.agent.graph.graph import build_graph
        from trainlog_debugger.agent.graph.state import Limits
        from trainlog_debugger.agent.graph.toolbox import Toolbox
        from trainlog_debugger.tools.redact import Redactor
        self.box = Toolbox(self.bundle, self.inv)
        hosts = self.box.hosts()
        self.redactor = Redactor(hosts=self.opts.redact_hosts, known_hosts=hosts)
        for h in hosts:  # placeholders in a fixed order, so a resumed conversation maps host-N the same way
            self.redactor.redact(h)
        self.box.redact, self.box.unmask = self.redactor.redact, self.redactor.unmask
        self.model_id = M.model_name(self.opts.model)
        if self.model is None:
            self.model = M.make_model(self.model_id)
        if self.checkpointer is None and self.opts.history:
            self.checkpointer = _sqlite_saver()
            if self.checkpointer is None:  # no writable state dir: history for this run only
                from langgraph.checkpoint.memory import MemorySaver
                self.checkpointer = MemorySaver()
        self.thread = bundle_thread(self.paths)
        if self.checkpointer is not None and not self.opts.resume:
            try:
                self.checkpointer.delete_thread(self.thread)
            except Exception:
                pass
        self.graph = build_graph(self.model, self.box, self.checkpointer,
                                 limits=Limits(max_rounds=self.opts.max_rounds, budget_tokens=self.opts.budget_tokens))
        self.tokens_in = self.tokens_out = 0

    def chat(self, question: str | None, on_event=None) -> AgentSection:
        """One question → the AgentSection of its answer. Never raises for the user: an API failure is `api_error`,
        anything else `error`, each with a one-line notice; tokens already spent are still counted."""
        before = self.redactor.secrets_found
        B.begin(self.model)  # this question's deadline and token meter (agent/llm/bounds.py)
        try:
            raw = ask(self.graph, question, self.thread, on_event=on_event)
        except Exception as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            line = M.describe_api_error(e)
            sec = offline_section(line or f"the agent failed ({type(e).__name__}: {' '.join(str(e).split())[:200]})",
                                  M.error_outcome(e), self.model_id, question)
            spent = self._spent()
            sec.tokens_in, sec.tokens_out = spent
            self.tokens_in += spent[0]
            self.tokens_out += spent[1]
            sec.cost_usd = M.cost_usd(self.model_id, *spent)
            return sec
        sec = AgentSection.model_validate(raw) if raw else offline_section("the agent returned nothing", "no_answer",
                                                                          self.model_id, question)
        sec.model = self.model_id
        self.tokens_in += sec.tokens_in
        self.tokens_out += sec.tokens_out
        sec.cost_usd = M.cost_usd(self.model_id, sec.tokens_in, sec.tokens_out)
        sec.cost_exact = M.price(self.model_id)[2]
        sec.secrets_redacted = self.redactor.secrets_found - before
        return self._unmasked(sec)

    def _spent(self) -> tuple[int, int]:
        """Tokens of the question in progress: the model's meter (every call that answered, history or not), else
        the thread's last saved state (0, 0 without history)."""
        if (metered := B.spent(self.model)) is not None:
            return metered
        try:
            v = self.graph.get_state({"configurable": {"thread_id": self.thread}}).values
            return int(v.get("tokens_in", 0) or 0), int(v.get("tokens_out", 0) or 0)
        except Exception:
            return 0, 0

    def sent(self) -> list[dict]:
        if self.checkpointer is None:
            return []
        return sent_messages(self.graph, self.thread)

    def cost(self) -> tuple[int, int, float]:
        return self.tokens_in, self.tokens_out, M.cost_usd(self.model_id, self.tokens_in, self.tokens_out)

    def _unmasked(self, sec: AgentSection) -> AgentSection:
        """Host names back for the user (secrets stay redacted: they were never kept)."""
        if not self.opts.redact_hosts:
            return sec
        u = self.redactor.unmask
        claims = [AgentClaim(statement=u(c.statement), verified=c.verified, dropped_because=c.dropped_because,
                             evidence=[e.model_copy(update={"text": u(e.text)}) for e in c.evidence])
                  for c in sec.claims]
        verdict = {k: ([u(x) for x in v] if k == "culprit_nodes" else u(v) if isinstance(v, str) else v)
                   for k, v in sec.verdict.items()}
        return sec.model_copy(update={"narrative": u(sec.narrative) if sec.narrative else sec.narrative,
                                      "claims": claims, "verdict": verdict,
                                      "changes": [u(c) for c in sec.changes]})


def private_dir(d: Path) -> Path:
    """`d`, created with mode 0700 for every component that does not exist yet (mkdir's `parents=True` makes them
    0755), and tightened to 0700 where it exists, is ours and is open to others; OSError where it belongs to another
    user or is not a directory. Why (issue 30): the history holds what the model was shown about a user's logs."""
    import stat
    missing = []
    p = d
    while not p.exists():
        missing.append(p)
        p = p.parent
    for q in reversed(missing):
        q.mkdir(mode=0o700)
    st = os.stat(d, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(str(d))
    if st.st_uid != os.getuid():
        raise PermissionError(f"{d} belongs to another user")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def private_db(path: Path):
    """A SQLite connection to `path`, the file created 0600 before SQLite opens it (its journal and WAL files take
    the database's mode) and tightened to 0600 where it exists."""
    import sqlite3
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return sqlite3.connect(str(path), check_same_thread=False)


def _sqlite_saver():
    """The on-disk checkpointer; None (history off, one line on stderr by the caller) when it cannot be opened."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    try:
        saver = SqliteSaver(private_db(private_dir(state_dir()) / "history.sqlite"))
        saver.setup()
        return saver
    except (OSError, sqlite3.Error):
        return None


def ask(graph, question: str | None, thread_id: str, *, on_event=None) -> dict:
    """One question through the graph in `thread_id` (the history of that thread is kept by the checkpointer). The
    counters restart per question; `on_event(node, update)` sees each step (progress on the terminal)."""
    cfg = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
    state: dict[str, Any] = {}
    for chunk in graph.stream({"question": question}, cfg, stream_mode="updates"):
        for node, update in chunk.items():
            if on_event:
                on_event(node, update)
            if isinstance(update, dict):
                state.update(update)
    final = graph.get_state(cfg).values if getattr(graph, "checkpointer", None) else state
    return final.get("section") or state.get("section") or {}


def sent_messages(graph, thread_id: str) -> list[dict]:
    """What the model was sent in this thread (for /evidence): role and text of each message, tool calls named."""
    vals = graph.get_state({"configurable": {"thread_id": thread_id}}).values
    out = []
    for m in vals.get("messages", []):
        kind = type(m).__name__
        role = {"HumanMessage": "user", "AIMessage": "assistant", "ToolMessage": "tool"}.get(kind, kind)
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, default=str)
        out.append({"role": role, "text": text, "tool_calls": [c["name"] for c in getattr(m, "tool_calls", [])]})
    return out


def with_agent(diag: Diagnosis, sec: AgentSection) -> Diagnosis:
    return diag.model_copy(update={"agent": sec, "narrative": sec.narrative})

"""One investigation per Slack thread: the open bundle, the deterministic Investigation, and (with a key) the agent's
Session, whose conversation id is the thread (`<channel>:<root ts>`), so a follow-up in the thread continues the
same investigation with its history.

History: the agent's LangGraph checkpointer, a SqliteSaver on `slack-history.sqlite` in the debugger's state
directory (agent/graph/session.py `state_dir`), one checkpoint thread per Slack thread. The bot answers events on
bolt's worker threads, so two threads' questions run at once: SqliteSaver serialises its own connection with a lock
(`check_same_thread=False`), and questions within one Slack thread are serialised by the conversation's lock (a
follow-up waits for the answer before it). An async saver would only be needed under bolt's asyncio App, which the
bot does not use.

Passes over the bytes of two conversations may run at once: each scan has its own engine, and each thread its own
Hyperscan scratch space (tools/scan/driver.py, engine.thread_scratch), so the deterministic pipeline and the agent's
tool calls (grep, step times, rank diff re-read the bundle) take no lock. Big bundles are scanned by worker
processes inside one pass anyway.

Memory: at most `cap` investigations stay open (least recently used closed first, their extracted uploads
removed). A follow-up in a thread whose investigation was closed, or predates a restart, is told so.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from trainlog_debugger.agent.graph.session import (AgentOptions, offline_section, private_db, private_dir, state_dir,
                                                  with_agent)
from trainlog_debugger.agent.llm import model as M
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import AgentSection, Diagnosis
from trainlog_debugger.tools.pipeline import run

log = logging.getLogger("trainlog_debugger.slack")


@dataclass
class Conversation:
    conv_id: str
    label: str
    bundle: object
    inv: object
    diag: Diagnosis
    tmpdir: str | None = None
    session: object = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)

    def close(self) -> None:
        try:
            self.bundle.close()
        finally:
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)


def sqlite_saver():
    """The bot's checkpointer on disk; an in-memory one (history for this run only) when that cannot be opened."""
    import sqlite3

    from langgraph.checkpoint.memory import MemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    try:
        saver = SqliteSaver(private_db(private_dir(state_dir()) / "slack-history.sqlite"))
        saver.setup()
        return saver
    except (OSError, sqlite3.Error) as e:
        log.warning("history kept in memory only (%s)", type(e).__name__)
        return MemorySaver()


class Conversations:
    def __init__(self, opts: AgentOptions, *, offline: bool = False, cap: int = 32, checkpointer=None,
                 make_model=None, max_extract_bytes: int = 8 << 30):
        self.opts, self.offline, self.cap = opts, offline, max(1, cap)
        self.checkpointer = checkpointer
        self.make_model = make_model or (lambda: M.make_model(M.model_name(opts.model)))
        self.max_extract = max_extract_bytes
        self._open: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def agent_on(self) -> str | None:
        """None when the agent will run, else why not (the line every reply shows)."""
        if self.offline:
            return "--offline: the agent did not run; this is the deterministic analysis only"
        if not M.has_key():
            return "no ANTHROPIC_API_KEY: the agent did not run; this is the deterministic analysis only"
        return None

    def get(self, conv_id: str) -> Conversation | None:
        with self._lock:
            c = self._open.get(conv_id)
            if c is not None:
                self._open.move_to_end(conv_id)
                c.used = time.monotonic()
            return c

    def start(self, conv_id: str, paths: list[str], label: str, *, tmpdir: str | None = None,
              progress=None) -> Conversation:
        """Open and investigate (deterministic). Raises BundleError (one line) when there is nothing usable."""
        b = open_bundle(paths, max_extract_bytes=self.max_extract)
        try:
            inv = run(b, progress=progress)
        except BaseException:
            b.close()
            raise
        conv = Conversation(conv_id, label, b, inv, inv.diagnosis, tmpdir)
        with self._lock:
            old = self._open.pop(conv_id, None)
            self._open[conv_id] = conv
            evicted = [self._open.popitem(last=False)[1] for _ in range(len(self._open) - self.cap)]
        for c in ([old] if old else []) + evicted:
            c.close()
        if self.checkpointer is not None:  # a new investigation in this thread starts a new history
            try:
                self.checkpointer.delete_thread(conv_id)
            except Exception:  # noqa: BLE001 - nothing to delete
                pass
        return conv

    def ask(self, conv: Conversation, question: str | None) -> AgentSection:
        """The agent's answer in this conversation (its Session made on first use, thread = the Slack thread);
        the offline section when the agent is off. Never raises: API failures are the section's notice."""
        if (why := self.agent_on()):
            return offline_section(why, model=self.opts.model, question=question)
        with conv.lock:
            if conv.session is None:
                from trainlog_debugger.agent.graph.session import Session
                opts = AgentOptions(**{**self.opts.__dict__, "resume": True, "history": True})
                conv.session = Session(conv.bundle, conv.inv, [conv.label], opts, model=self.make_model(),
                                       checkpointer=self.checkpointer)
                conv.session.thread = conv.conv_id  # the Slack thread is the conversation
            try:
                return conv.session.chat(question)
            except Exception as e:  # noqa: BLE001 - Session.chat already turns API errors into a section
                return offline_section(f"the agent failed ({type(e).__name__})", "error", self.opts.model, question)

    def with_agent(self, conv: Conversation, sec: AgentSection) -> Diagnosis:
        conv.diag = with_agent(conv.inv.diagnosis, sec)
        return conv.diag

    def close_all(self) -> None:
        with self._lock:
            convs = list(self._open.values())
            self._open.clear()
        for c in convs:
            c.close()

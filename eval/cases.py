"""Eval cases: a case is a folder that holds `truth.yaml`; every other file below it is the log bundle.

Why the bundle is copied before the diagnosis sees it: a case folder's name (`gpu-oom-rank3`), its path and its
label are answers. The diagnosis must work from the logs alone, as it will on a user's bundle, so each case is
hard-linked (or copied, across file systems) into `tempfile.mkdtemp(prefix="bundle-")/bundle` without
`truth.yaml`, diagnosed there, and the copy is removed afterwards. In LLM mode this is also what keeps labels out
of the model's context.

truth.yaml (the format is fixed; see ../shared/incidents/README.md): `category` (one of tools.model.CATEGORIES,
`none` for a control), `culprit_ranks` (ints, may be empty), `culprit_nodes` (optional), `root_cause`, `evidence`,
optional `first_failure_time`, `tags`, `source_url`, `title`, `framework`, `scale`, `confidence`, `notes`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from trainlog_debugger.tools.model import CATEGORIES

LABEL = "truth.yaml"
CONTROL_TAG = "control"
SPLITS = ("dev", "test")


def split_of(slug: str) -> str:
    """The split a real incident gets when it is collected: `test` for one slug in three, from a hash of the slug
    alone. Why a hash and not a choice: the split is fixed before anyone reads the incident, so nobody can put the
    cases a rule was written for into `dev` or the hard ones out of `test`. The seed incidents of
    ../shared/incidents are all `dev` (they were read while the tool was built), whatever their hash says."""
    return "test" if int.from_bytes(hashlib.sha256(slug.encode("utf-8")).digest()[:8], "big") % 3 == 0 else "dev"


class CaseError(Exception):
    """A case or a PATH that cannot be evaluated: one line for the user."""


@dataclass(frozen=True)
class Truth:
    category: str
    culprit_ranks: tuple[int, ...] = ()
    culprit_nodes: tuple[str, ...] = ()
    root_cause: str = ""
    evidence: tuple[str, ...] = ()
    first_failure_time: str | None = None
    tags: tuple[str, ...] = ()
    title: str = ""
    source_url: str = ""
    framework: str = ""
    scale: str = ""
    confidence: str = ""
    notes: str = ""
    category_accept: tuple[str, ...] = ()  # second labels that are genuinely defensible (TAXONOMY), scored as right
    split: str = ""  # real incidents: dev (rules may be written from it) or test (scored, never read for ideas)
    seed: bool = False  # one of ../shared/incidents, read while the tool was built: dev whatever its hash says
    extra: dict = field(default_factory=dict, compare=False)

    def category_ok(self, got: str) -> bool:
        return got == self.category or got in self.category_accept

    @property
    def is_control(self) -> bool:
        """A control case: a healthy run (`category: none`) or one tagged `control` (e.g. a scheduler cancel,
        category infrastructure). Raising an alarm that differs from the truth on it is a false alarm."""
        return self.category == "none" or CONTROL_TAG in self.tags


@dataclass(frozen=True)
class Case:
    id: str      # '<parent folder>/<case folder>': stable whatever the working directory
    path: Path
    truth: Truth


_KNOWN = {"category", "culprit_ranks", "culprit_nodes", "root_cause", "evidence", "first_failure_time", "tags",
          "title", "source_url", "framework", "scale", "confidence", "notes", "category_accept", "split", "seed"}


def _text(v) -> str:
    return "" if v is None else str(v).strip()


def _list(v, what: str, path: Path) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        raise CaseError(f"{path}: {what} must be a list")
    return v


def _time(v) -> str | None:
    """first_failure_time as an ISO string; YAML turns an unquoted timestamp into a datetime."""
    if v is None or v == "":
        return None
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    return str(v).strip()


def load_truth(path: str | Path) -> Truth:
    """Parse and check one truth.yaml (raises CaseError with one line)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise CaseError(f"{path}: cannot read ({type(e).__name__}: {' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise CaseError(f"{path}: not a mapping")
    cat = _text(data.get("category"))
    if cat not in CATEGORIES:
        raise CaseError(f"{path}: category {cat!r} is not one of {', '.join(CATEGORIES)}")
    ranks = []
    for r in _list(data.get("culprit_ranks"), "culprit_ranks", path):
        if isinstance(r, bool) or not isinstance(r, int):
            raise CaseError(f"{path}: culprit_ranks must be integers, got {r!r}")
        ranks.append(r)
    nodes = [_text(n) for n in _list(data.get("culprit_nodes"), "culprit_nodes", path) if _text(n)]
    evidence = [_text(e) for e in _list(data.get("evidence"), "evidence", path)]
    tags = [_text(t) for t in _list(data.get("tags"), "tags", path) if _text(t)]
    accept = [_text(c) for c in _list(data.get("category_accept"), "category_accept", path) if _text(c)]
    for c in accept:
        if c not in CATEGORIES:
            raise CaseError(f"{path}: category_accept {c!r} is not one of {', '.join(CATEGORIES)}")
    split = _text(data.get("split"))
    if split and split not in SPLITS:
        raise CaseError(f"{path}: split {split!r} is not one of {', '.join(SPLITS)}")
    return Truth(category=cat, culprit_ranks=tuple(ranks), culprit_nodes=tuple(nodes),
                 root_cause=_text(data.get("root_cause")), evidence=tuple(evidence),
                 first_failure_time=_time(data.get("first_failure_time")), tags=tuple(tags),
                 title=_text(data.get("title")), source_url=_text(data.get("source_url")),
                 framework=_text(data.get("framework")), scale=_text(data.get("scale")),
                 confidence=_text(data.get("confidence")), notes=_text(data.get("notes")),
                 category_accept=tuple(accept), split=split, seed=data.get("seed") is True, extra={k: v for k, v in data.items() if k not in _KNOWN})


def _case(folder: Path) -> Case:
    folder = folder.resolve()
    return Case(id=f"{folder.parent.name}/{folder.name}", path=folder, truth=load_truth(folder / LABEL))


def discover(paths: Iterable[str | Path]) -> list[Case]:
    """The cases under each PATH: the folder itself when it holds truth.yaml, else its sub-folders that do, and
    the sub-folders of a sub-folder that holds no truth.yaml itself (`cases/real/<slug>`), in name order. A PATH
    with no case, or the same case named twice, is a CaseError."""
    from trainlog_debugger.tools.bundle.source import natural_key
    out: list[Case] = []
    seen: dict[str, Path] = {}
    for p in map(Path, paths):
        if not p.is_dir():
            raise CaseError(f"not a case folder or a folder of case folders: {p}")
        if (p / LABEL).is_file():
            found = [p]
        else:
            found = []
            for d in sorted((d for d in p.iterdir() if d.is_dir() and not d.name.startswith(".")),
                            key=lambda d: natural_key(d.name)):
                if (d / LABEL).is_file():
                    found.append(d)
                else:
                    found.extend(sorted((e for e in d.iterdir() if e.is_dir() and not e.name.startswith(".")
                                         and (e / LABEL).is_file()), key=lambda e: natural_key(e.name)))
        if not found:
            raise CaseError(f"no case in {p} (a case is a folder that holds {LABEL})")
        for d in found:
            c = _case(d)
            if c.id in seen:
                if seen[c.id] == c.path:
                    continue  # the same folder given twice
                raise CaseError(f"two cases with the same id {c.id}: {seen[c.id]} and {c.path}")
            seen[c.id] = c.path
            out.append(c)
    return out


def filter_tags(cases: list[Case], tags: Iterable[str] | None) -> list[Case]:
    """Cases that carry any of `tags` (none given: all)."""
    want = set(tags or ())
    return [c for c in cases if not want or want & set(c.truth.tags)]


def _place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def copy_bundle(case_dir: str | Path, dest: str | Path) -> list[str]:
    """Hard-link or copy every file below `case_dir` except truth.yaml into `dest` (same relative layout).
    Links are resolved: a link to a file inside the case is copied as that file; other links are left out (their
    target could name the case). Returns the relative paths placed."""
    case_dir, dest = Path(case_dir).resolve(), Path(dest)
    placed: list[str] = []
    for d, dirs, files in os.walk(case_dir):
        dirs.sort()
        for name in sorted(files):
            if name == LABEL:
                continue
            src = Path(d) / name
            rel = src.relative_to(case_dir)
            if src.is_symlink():
                target = src.resolve()
                if not (target.is_file() and target.is_relative_to(case_dir)) or target.name == LABEL:
                    continue
                src = target
            elif not src.is_file():
                continue
            _place(src, dest / rel)
            placed.append(rel.as_posix())
    return placed


@contextmanager
def neutral_bundle(case_dir: str | Path) -> Iterator[Path]:
    """The case's bundle at a path that says nothing about the case: `<tmp>/bundle-XXXX/bundle`, removed on exit."""
    tmp = Path(tempfile.mkdtemp(prefix="bundle-"))
    try:
        dest = tmp / "bundle"
        dest.mkdir()
        copy_bundle(case_dir, dest)
        yield dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

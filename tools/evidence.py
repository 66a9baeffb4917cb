"""Evidence and Coverage, the two types of the model (tools.model) that a scan makes, as plain classes.

Why not pydantic models like the rest of tools.model: importing pydantic and building its models costs ~0.15 s,
more than the whole start-up budget of `debugger scan` on a small bundle (issue 16: under 0.15 s), and a scan of
4,096 files makes ~20,000 of these, each validated. A scan imports this module, never pydantic.

They behave as the pydantic models they were, for everything done with them here and by callers: keyword
construction validated the same way (values of exactly the declared types are taken as they are, as pydantic takes
them; anything else, a missing or an unknown field included, is handed to pydantic, which coerces or raises the
same ValidationError as before), Evidence frozen (hashable, equal by value), Coverage mutable; model_copy,
model_dump, model_dump_json, model_validate, model_validate_json, model_json_schema, model_fields (its names),
repr, str, iteration over (name, value), pickling; and use as field types of the pydantic models in tools.model:
validation, serialization and the JSON schema of `debugger schema` are the same as before, because pydantic sees
each class through its twin, a pydantic model of the same name and fields built on first use (`_twins`).
"""

import copy
import threading
from typing import TYPE_CHECKING, Any, ClassVar

from trainlog_debugger.tools.lines.timestamps import Stamp

if TYPE_CHECKING:  # the twins' type only: a scan never imports pydantic
    from pydantic import BaseModel

_MISSING: Any = object()


class _Plain:
    """What Evidence and Coverage share: fields in slots, and the pydantic-model surface the code base uses."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _setters: ClassVar[tuple] = ()
    model_fields: ClassVar[dict[str, Any]] = {}  # name → default (... when required), in field order

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._fields = cls.__slots__
        cls.model_fields = {name: cls._DEFAULTS.get(name, ...) for name in cls.__slots__}
        # the slots' own setters: past a frozen class's __setattr__, and cheaper than object.__setattr__ by name
        cls._setters = tuple(cls.__dict__[name].__set__ for name in cls.__slots__)

    def _set(self, values) -> None:
        for put, v in zip(self._setters, values):
            put(self, v)

    def _validated(self, kw: dict) -> None:
        """Fields as pydantic makes them from `kw`: through the twin (coercion, or its ValidationError)."""
        twin = _twin(type(self))(**kw)
        self._set(getattr(twin, name) for name in self._fields)

    @classmethod
    def _from_twin(cls, twin) -> "_Plain":
        out = cls.__new__(cls)
        out._set(getattr(twin, name) for name in cls._fields)
        return out

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields)

    def _as_twin(self):
        return _twin(type(self)).model_construct(**dict(zip(self._fields, self._values())))

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __iter__(self):
        return iter(zip(self._fields, self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__str__(', ')})"

    def __str__(self, sep: str = " ") -> str:
        return sep.join(f"{name}={v!r}" for name, v in self)

    def __reduce__(self):
        return _restore, (type(self), self._values())

    def to_json(self) -> dict:
        """What `model_dump(mode="json", exclude_none=True)` gives (the fields that are not None, in order; a time
        as Stamp.to_json()), without pydantic: `debugger scan --json` prints ~20,000 Evidence at 4,096 ranks, and
        pydantic's serializer took a quarter of a second for them (tools.jsonable calls this)."""
        out = {}
        for name in self._fields:
            v = getattr(self, name)
            if v is not None:
                out[name] = _json(v)
        return out

    def model_copy(self, *, update: dict | None = None, deep: bool = False):
        """As pydantic's: the fields copied (deep: copy.deepcopy), `update` set as given, not validated."""
        values = dict(zip(self._fields, copy.deepcopy(self._values()) if deep else self._values()))
        for name, v in (update or {}).items():
            if name in values:
                values[name] = v
        out = type(self).__new__(type(self))
        out._set(values[name] for name in self._fields)
        return out

    def model_dump(self, **kw) -> dict:
        return self._as_twin().model_dump(**kw)

    def model_dump_json(self, **kw) -> str:
        return self._as_twin().model_dump_json(**kw)

    @classmethod
    def model_validate(cls, obj, **kw):
        return obj if isinstance(obj, cls) else cls._from_twin(_twin(cls).model_validate(obj, **kw))

    @classmethod
    def model_validate_json(cls, data, **kw):
        return cls._from_twin(_twin(cls).model_validate_json(data, **kw))

    @classmethod
    def model_json_schema(cls, **kw) -> dict:
        return _twin(cls).model_json_schema(**kw)

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        """Inside a pydantic model, this class is its twin's schema, with instances taken as they are (as pydantic
        takes instances of a model) and anything else validated by the twin and made into this class; dumped by
        the twin's serializer."""
        from pydantic_core import core_schema

        inner = handler.generate_schema(_twin(cls))

        def validate(value, nxt):
            return value if isinstance(value, cls) else cls._from_twin(nxt(value))

        def serialize(value, nxt):
            return nxt(value._as_twin() if isinstance(value, cls) else value)

        return core_schema.no_info_wrap_validator_function(
            validate, inner, serialization=core_schema.wrap_serializer_function_ser_schema(serialize, schema=inner))


def _restore(cls, values: tuple):
    out = cls.__new__(cls)
    out._set(values)
    return out


class Evidence(_Plain):
    """A line we can re-read: `file` + `line` + verbatim `text` locate it; the rest is what we inferred."""

    __slots__ = ("file", "line", "text", "offset", "time", "rank", "node", "kind")
    _DEFAULTS: ClassVar[dict] = {"offset": None, "time": None, "rank": None, "node": None, "kind": None}

    file: str
    line: int  # >= 1
    text: str
    offset: int | None
    time: Stamp | None  # what the line's stamp states; unknown parts stay unknown
    rank: int | None
    node: str | None
    kind: str | None  # source kind (tools.sources.detect)

    def __init__(self, *, file: str = _MISSING, line: int = _MISSING, text: str = _MISSING, offset: int | None = None,
                 time: Stamp | None = None, rank: int | None = None, node: str | None = None, kind: str | None = None,
                 **unknown):
        if (not unknown and type(file) is str and type(line) is int and line >= 1 and type(text) is str
                and (offset is None or type(offset) is int) and (time is None or type(time) is Stamp)
                and (rank is None or type(rank) is int) and (node is None or type(node) is str)
                and (kind is None or type(kind) is str)):
            _EV_FILE(self, file)  # the slots' setters one by one: a 90,000-hit bundle makes as many of these
            _EV_LINE(self, line)
            _EV_TEXT(self, text)
            _EV_OFFSET(self, offset)
            _EV_TIME(self, time)
            _EV_RANK(self, rank)
            _EV_NODE(self, node)
            _EV_KIND(self, kind)
        else:
            given = dict(file=file, line=line, text=text, offset=offset, time=time, rank=rank, node=node, kind=kind)
            self._validated({k: v for k, v in given.items() if v is not _MISSING} | unknown)

    def __setattr__(self, name, value):
        self._as_twin().__setattr__(name, value)  # raises pydantic's own error: the model is frozen
        raise AttributeError(name)  # pragma: no cover - the twin always raises

    def __hash__(self) -> int:
        return hash(self._values())

    def cite(self) -> str:
        return f"{self.file}:{self.line}"



_EV_FILE, _EV_LINE, _EV_TEXT, _EV_OFFSET, _EV_TIME, _EV_RANK, _EV_NODE, _EV_KIND = Evidence._setters


class Coverage(_Plain):
    """Which ranks we expected and which we actually saw: absence is reported, never dropped silently."""

    __slots__ = ("expected_ranks", "expected_from", "expected_evidence", "seen_ranks", "missing_ranks", "files",
                 "files_without_rank", "skipped", "notes")
    _DEFAULTS: ClassVar[dict] = {"expected_ranks": None, "expected_from": None, "expected_evidence": [],
                                 "seen_ranks": [], "missing_ranks": [], "files": 0, "files_without_rank": 0,
                                 "skipped": [], "notes": []}

    expected_ranks: int | None
    expected_from: str | None  # 'world size in logs', 'NCCL nranks', 'max rank seen'
    expected_evidence: list[Evidence]
    seen_ranks: list[int]
    missing_ranks: list[int]
    files: int
    files_without_rank: int
    skipped: list[dict[str, str]]
    notes: list[str]

    def __init__(self, *, expected_ranks: int | None = None, expected_from: str | None = None,
                 expected_evidence: list[Evidence] = _MISSING, seen_ranks: list[int] = _MISSING,
                 missing_ranks: list[int] = _MISSING, files: int = 0, files_without_rank: int = 0,
                 skipped: list[dict[str, str]] = _MISSING, notes: list[str] = _MISSING, **unknown):
        ev = [] if expected_evidence is _MISSING else expected_evidence
        seen = [] if seen_ranks is _MISSING else seen_ranks
        missing = [] if missing_ranks is _MISSING else missing_ranks
        skip = [] if skipped is _MISSING else skipped
        nts = [] if notes is _MISSING else notes
        if (not unknown and (expected_ranks is None or type(expected_ranks) is int)
                and (expected_from is None or type(expected_from) is str) and type(files) is int
                and type(files_without_rank) is int and _list_of(ev, Evidence) and _list_of(seen, int)
                and _list_of(missing, int) and _list_of(nts, str) and type(skip) is list
                and all(type(d) is dict and all(type(k) is str and type(v) is str for k, v in d.items()) for d in skip)):
            # new lists, as pydantic's validation makes: the caller's lists are not the report's
            self._set((expected_ranks, expected_from, list(ev), list(seen), list(missing), files, files_without_rank,
                       [dict(d) for d in skip], list(nts)))
        else:
            given = dict(expected_ranks=expected_ranks, expected_from=expected_from, expected_evidence=ev,
                         seen_ranks=seen, missing_ranks=missing, files=files, files_without_rank=files_without_rank,
                         skipped=skip, notes=nts)
            self._validated(given | unknown)

    def __setattr__(self, name, value):
        if name not in self._fields:
            self._as_twin().__setattr__(name, value)  # pydantic's error for a field the model does not have
        object.__setattr__(self, name, value)  # assignment is not validated, as in the model

    # unhashable, mutable as the model was: _Plain defines __eq__, so the __hash__ it and this class have is None

    def to_json(self) -> dict:
        """As the twin dumps it: the rank lists as range sets with their counts (schema_version 2: at 10,000 ranks
        a list of every rank seen was most of `ask --json`), the lists themselves under `--per-rank`."""
        return _ranks_json(super().to_json())


def _json(v: Any) -> Any:
    if isinstance(v, (Stamp, _Plain)):
        return v.to_json()
    if isinstance(v, list):
        return [_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v


RANK_LISTS = ("seen_ranks", "missing_ranks")
RANK_LIST_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}],
                    "description": "a rank set such as '0-4095 except 1365' (tools.groups.rank_set); a list of ranks "
                                   "with --per-rank"}


def _ranks_json(d: dict) -> dict:
    """Coverage's JSON with its rank lists as range sets plus `seen_count` / `missing_count` (the lists as they were
    under tools.groups.per_rank())."""
    from trainlog_debugger.tools.groups import per_rank, rank_set  # tools.groups imports this module
    out = dict(d)
    listing = per_rank()
    for name in RANK_LISTS:
        ranks = d.get(name) or []
        out[name] = list(ranks) if listing else rank_set(ranks)
        out[name.replace("_ranks", "_count")] = len(ranks)
    return out


def _ranks_in(v: Any) -> Any:
    """A rank list read back from JSON: a range-set string (schema_version 2) or a list."""
    if isinstance(v, str):
        from trainlog_debugger.tools.groups import parse_rank_set
        return parse_rank_set(v)
    return v


def _list_of(v, t: type) -> bool:
    return type(v) is list and all(type(x) is t for x in v)


def _stamp_in(v: Any) -> Stamp:
    if isinstance(v, Stamp):
        return v
    if isinstance(v, dict):
        return Stamp.from_json(v)
    raise ValueError("a time is a Stamp or its JSON object")


_PlainEvidence = Evidence  # the names the twins' fields use for the plain classes, which the twins' own names shadow
_PlainCoverage = Coverage
_TWINS: dict[str, "type[BaseModel]"] = {}
_BUILDING = threading.RLock()


def _twin(cls: type) -> "type[BaseModel]":
    """The pydantic model `cls` was (same name and fields): what validates what is not of the declared types,
    dumps, and describes it in JSON schemas. Built on first use (it imports pydantic), once per process."""
    if cls.__name__ not in _TWINS:
        with _BUILDING:  # re-entered by the same thread: building Coverage's twin asks for Evidence's
            if not _TWINS:
                _build_twins()
    return _TWINS[cls.__name__]


def _build_twins() -> None:
    from typing import Annotated

    from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PlainValidator,
                          WithJsonSchema, model_serializer)

    # A typed time on the Python side (ordered by Stamp.order_key), the same JSON object as Stamp.to_json() outside.
    stamp_field = Annotated[Stamp, PlainValidator(_stamp_in), PlainSerializer(lambda s: s.to_json(), return_type=dict),
                            WithJsonSchema({"type": "object", "description": "Stamp.to_json(): the parsed parts (year, "
                                            "month, day, hour, minute, second, micro, tz, utc_offset_min, uptime_s, "
                                            "nanos), iso, has_date, has_year, has_zone, and any provenance keys"})]

    class Evidence(BaseModel):  # the twin has the plain class's name: JSON schemas and errors name it so
        __doc__ = _PlainEvidence.__doc__
        model_config = ConfigDict(frozen=True)

        file: str
        line: int = Field(ge=1)
        text: str
        offset: int | None = None
        time: stamp_field | None = None
        rank: int | None = None
        node: str | None = None
        kind: str | None = None

    _TWINS["Evidence"] = Evidence

    # ranks in Python, a range set in JSON (schema_version 2; `--per-rank`: the list), either read back
    rank_list = Annotated[list[int], BeforeValidator(_ranks_in), WithJsonSchema(RANK_LIST_SCHEMA)]

    class Coverage(BaseModel):
        __doc__ = _PlainCoverage.__doc__

        expected_ranks: int | None = None
        expected_from: str | None = None
        expected_evidence: list[_PlainEvidence] = Field(default_factory=list)
        seen_ranks: rank_list = Field(default_factory=list)
        missing_ranks: rank_list = Field(default_factory=list)
        files: int = 0
        files_without_rank: int = 0
        skipped: list[dict[str, str]] = Field(default_factory=list)
        notes: list[str] = Field(default_factory=list)

        @model_serializer(mode="wrap")
        def _ranks_as_sets(self, nxt, info):
            d = nxt(self)
            return _ranks_json(d) if info.mode == "json" else d

    _TWINS["Coverage"] = Coverage

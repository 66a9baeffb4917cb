"""vcrpy set-up for the agent's HTTP tests: replay only (`record_mode="none"`), the key headers filtered, requests
matched on method, path and the JSON body with volatile fields ignored, so a changed prompt or tool list fails
loudly instead of replaying a stale answer. A missing cassette fails with how to make one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import vcr

CASSETTES = Path(__file__).resolve().parent / "cassettes"
VOLATILE = ("metadata", "stream")  # fields that may differ between runs without changing the request's meaning
SECRET_HEADERS = ["x-api-key", "authorization", "anthropic-api-key", "cookie", "set-cookie"]
HOW_TO_RECORD = ("record it: `python tests/agent/make_cassettes.py NAME` writes the hand-written ones from their "
                 "scripted replies; with ANTHROPIC_API_KEY set, `python tests/agent/make_cassettes.py --real NAME` "
                 "records one against the real API")


def _body(r) -> dict:
    raw = r.body or b"{}"
    try:
        d = json.loads(raw if isinstance(raw, (str, bytes)) else bytes(raw))
    except ValueError:
        return {"_raw": str(raw)}
    return {k: v for k, v in d.items() if k not in VOLATILE} if isinstance(d, dict) else d


def json_body(r1, r2) -> None:
    a, b = _body(r1), _body(r2)
    if a != b:
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        raise AssertionError(f"request body differs from the cassette in {keys}")


def replayer(record_mode: str = "none") -> vcr.VCR:
    v = vcr.VCR(record_mode=record_mode, match_on=["method", "path", "json_body"], filter_headers=SECRET_HEADERS,
                decode_compressed_response=True)
    v.register_matcher("json_body", json_body)
    return v


def cassette(name: str):
    """The replay context for cassettes/NAME.yaml; pytest.fail with how to record it when it is missing."""
    path = CASSETTES / f"{name}.yaml"
    if not path.exists():
        pytest.fail(f"no cassette {path.name}: {HOW_TO_RECORD}", pytrace=False)
    return replayer("none").use_cassette(str(path), allow_playback_repeats=False)

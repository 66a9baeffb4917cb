"""Recorded HTTP exchanges with the Messages API (vcrpy cassettes), for `debugger eval --mode llm` (its cassettes
live in eval/cassettes/) and the agent's tests: one place for how they are matched and what is filtered out.

Replay is `record_mode="none"`: a request with no recorded twin fails, it never reaches the network. Requests are
matched on method, path and the JSON body with volatile fields ignored, so a changed prompt, tool list or tool
result fails loudly instead of replaying a stale answer. Key headers are filtered before anything is written.
Hand-written cassettes (scripted replies in the API's real format, tests/agent/make_cassettes.py) say so in their
file name: `<name>.handwritten.yaml`.
"""

from __future__ import annotations

import json
from pathlib import Path

VOLATILE = ("metadata", "stream")  # fields that may differ between runs without changing the request's meaning
SECRET_HEADERS = ["x-api-key", "authorization", "anthropic-api-key", "cookie", "set-cookie"]


def _body(r) -> dict:
    raw = r.body or b"{}"
    try:
        d = json.loads(raw)
    except (TypeError, ValueError):
        return {"_raw": str(raw)}
    return {k: v for k, v in d.items() if k not in VOLATILE} if isinstance(d, dict) else d


def json_body(r1, r2) -> None:
    """vcrpy matcher: raises AssertionError naming the fields that differ (vcrpy shows it on a miss)."""
    a, b = _body(r1), _body(r2)
    if a != b:
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        raise AssertionError(f"request body differs from the cassette in {keys}")


def replayer(record_mode: str = "none"):
    """A configured vcr.VCR. vcrpy is a test/eval extra: without it, a clear error."""
    try:
        import vcr
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RuntimeError("cassettes need vcrpy: pip install 'trainlog-debugger[test]'") from e
    v = vcr.VCR(record_mode=record_mode, match_on=["method", "path", "json_body"], filter_headers=SECRET_HEADERS,
                decode_compressed_response=True)
    v.register_matcher("json_body", json_body)
    return v


def find(directory: Path, name: str) -> Path | None:
    """`<name>.yaml` (recorded) or `<name>.handwritten.yaml`, recorded first."""
    for p in (directory / f"{name}.yaml", directory / f"{name}.handwritten.yaml"):
        if p.exists():
            return p
    return None


def case_name(case_id: str) -> str:
    """A case id (`cases/gen-slurm-8r-a`) as a cassette file name."""
    return case_id.strip("/").replace("/", "__")

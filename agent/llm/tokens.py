"""Token counting and capping for what the agent sends to the model.

Why tiktoken's cl100k_base and not Claude's own tokenizer: Anthropic publishes no offline tokenizer, and the
count only has to be close enough to keep each tool result and the whole investigation inside a budget (Claude's
counts run within ~15 % of cl100k on log text). The encoding file ships inside the package (gzip, checked against
tiktoken's published SHA-256) and is loaded from there: tiktoken would otherwise download it on first use, and the
machines this runs on often have no internet.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from functools import lru_cache
from importlib.resources import files

import tiktoken

ENCODING_FILE = "cl100k_base.tiktoken.gz"
ENCODING_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"  # tiktoken_ext.openai_public
_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
        r"""\s+(?!\S)|\s""")
_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276}


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """cl100k_base from the bundled file; never the network."""
    raw = gzip.decompress(files("trainlog_debugger.agent.llm").joinpath(ENCODING_FILE).read_bytes())
    if hashlib.sha256(raw).hexdigest() != ENCODING_SHA256:
        raise RuntimeError(f"the bundled {ENCODING_FILE} is corrupt (SHA-256 differs): reinstall trainlog-debugger")
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (ln.split() for ln in raw.splitlines() if ln)}
    return tiktoken.Encoding(name="cl100k_base", pat_str=_PAT, mergeable_ranks=ranks, special_tokens=_SPECIAL)


def count(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def cap(text: str, max_tokens: int) -> tuple[str, int, int]:
    """(text cut to at most `max_tokens` tokens on a line boundary where possible, tokens kept, tokens in all)."""
    enc = encoding()
    toks = enc.encode(text, disallowed_special=())
    if len(toks) <= max_tokens:
        return text, len(toks), len(toks)
    cut = enc.decode(toks[:max(0, max_tokens)])
    nl = cut.rfind("\n")
    if nl > len(cut) // 2:
        cut = cut[:nl]
    return cut, count(cut), len(toks)

"""The rank that differs (protocol step 2): error-looking lines that only a few ranks printed, read from the rank
diff (tools/rankdiff), for failures no catalog pattern knows.

Why: one rank out of 512 printing `Timeout while fetching batch result at index 88` is invisible to a catalog that
has never seen the wording, and obvious as a difference. The diff is a second pass over the bytes, so the pipeline
pays for it only when the first answer is not decisive (tools/pipeline.py). What such a line means is read with the
terminal-error table; a line the table cannot read names the culprit rank but not the category, so it stays weak
and the answer `inconclusive`.
"""

from __future__ import annotations

import re

from trainlog_debugger.tools.ranks import ranks_str
from trainlog_debugger.tools.rules.base import RuleInputs, candidate
from trainlog_debugger.tools.rules.terminal import classify, handled

MIN_RANKS = 3  # with two ranks, "the one that differs" is either of them
MAX_SHARE = 0.125  # a template printed by at most this share of the ranks (at least one rank) is an outlier's
_ERRORISH = re.compile(r"(?i)\b(?:error|exception|traceback|failed|failure|fatal|abort(?:ed)?|timed? ?out|killed|"
                       r"hang(?:ing)?|stuck|cannot|could not|unable to)\b")


def outlier_lines(f: RuleInputs):
    diff = f.diff
    if diff is None or len(diff.ranks) < MIN_RANKS:
        return []
    limit = max(1, int(len(diff.ranks) * MAX_SHARE))
    for t in diff.only:  # fewest ranks first, error-looking first among those
        text = t.example.text
        if len(t.ranks) > limit or not _ERRORISH.search(text) or handled(text):
            continue
        said = classify(text)
        others = len(diff.ranks) - len(t.ranks)
        summary = (f"rank(s) {ranks_str(t.ranks)} printed a line no other rank printed ({others} ranks did not)"
                   + (f": {said[1]}" if said else ""))
        return [candidate("asymmetry.outlier_lines", said[0] if said else "software", summary, 0.55 if said else 0.4,
                          [t.example], f, ranks=list(t.ranks)[:64], facts={"template": t.template[:300],
                                                                         "ranks_with_it": len(t.ranks)},
                          recommendations=[f"read rank(s) {ranks_str(t.ranks)}'s log around this line: it is the "
                                           "rank that differs"])]
    return []


RULES = [outlier_lines]

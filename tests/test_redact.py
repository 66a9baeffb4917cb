"""tools.redact: secrets leave log text before it goes to an LLM/Slack/a report; evidence (near misses) stays.

Token-shaped fixtures are assembled from pieces so that secret scanners (GitHub push protection) do not flag this
file; the AWS pair is AWS's own documented example.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import re
import string
import time
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainlog_debugger.tools import redact as redact_module
from trainlog_debugger.tools.evidence import Evidence
from trainlog_debugger.tools.model import Finding, Role
from trainlog_debugger.tools.redact import (
    _SECRET_RE,
    SECRET_MARK,
    Redactor,
    _may_hold_secret,
    redact_secrets,
    redact_tree,
)

HF = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEFGH"
WANDB = "0123456789abcdef0123456789abcdef01234567"
ANTHROPIC = ("sk-" + "ant-api03-" + "Xq7vR2mN9pL4kJ8hG3fD6sA1zW5yT0uBcVeQiOoP-_aZbYcXdW9x8v7u6t5s4r3q2p1o0n"
             "MlKjIhGfEdCbA-AAAA")
OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xox" + "b-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AI" + "za" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
       ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM_BODY = [
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw",
    "7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFc",
    "zGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE",
]


# (log line, the secret that must be gone, what must be kept)
SECRET_LINES = [
    (f"HF_TOKEN={HF}", HF, "HF_TOKEN="),
    (f"export WANDB_API_KEY={WANDB}", WANDB, "export WANDB_API_KEY="),
    (
        "torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d train.py --hf-token xyz123secret --bf16",
        "xyz123secret",
        "--hf-token [REDACTED] --bf16",
    ),
    ("python serve.py --api-key=Zk29fjQ01x --port 8000", "Zk29fjQ01x", "--api-key=[REDACTED] --port 8000"),
    (f"DEBUG:urllib3: send: Authorization: Bearer {JWT}", JWT, "Authorization: Bearer [REDACTED]"),
    ("Authorization: Basic dXNlcjpwNHNzdzByZA==", "dXNlcjpwNHNzdzByZA==", "Authorization: Basic [REDACTED]"),
    (f"curl -H 'x-api-key: {ANTHROPIC}' https://api.anthropic.com/v1/messages", "Xq7vR2mN9pL4", "x-api-key: "),
    (
        "Looking in indexes: https://user:p4ssw0rd@artifactory.example.com/simple",
        "p4ssw0rd",
        "https://user:[REDACTED]@artifactory.example.com/simple",
    ),
    (f"AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID, "AWS_ACCESS_KEY_ID="),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = "),
    (f"client = Anthropic(api_key='{ANTHROPIC}')", ANTHROPIC, "api_key='[REDACTED]'"),
    (f"[rank0]: retrying with key {ANTHROPIC} after 429", "Xq7vR2mN9pL4", "key sk-ant-[REDACTED] after 429"),
    (f"openai key in config: {OPENAI}", OPENAI, "sk-[REDACTED]"),
    (f"remote: https://github.com/org/repo.git token {GITHUB}", GITHUB, "token ghp_[REDACTED]"),
    (f"SLACK_BOT_TOKEN={SLACK}", SLACK, "SLACK_BOT_TOKEN=[REDACTED]"),
    (f"posting to slack with {SLACK}", "AbCdEfGhIj", "xoxb-[REDACTED]"),
    (f"maps client ready ({GOOGLE})", GOOGLE, "(AIza[REDACTED])"),
    (f"Downloading with token {HF}", HF, "hf_[REDACTED]"),
    (f"loaded credentials for {AWS_ID}", AWS_ID, "AKIA[REDACTED]"),
    (f"session cookie {JWT}", JWT, "session cookie [REDACTED]"),
    (f'{{"hf_token": "{HF}", "lr": 0.0003}}', HF, '"hf_token": "[REDACTED]", "lr": 0.0003'),
    (f"Namespace(hub_token='{HF}', max_steps=1000)", HF, "hub_token='[REDACTED]', max_steps=1000"),
    ("DB_PASSWORD=hunter2", "hunter2", "DB_PASSWORD=[REDACTED]"),
    ("MYSQL_PWD=123456", "123456", "MYSQL_PWD=[REDACTED]"),  # a number is a password under a password name
    ("  api_key ........................................ s3cr3tV4lue", "s3cr3tV4lue", "api_key ...."),  # Megatron
    ("os.environ['OPENAI_API_KEY'] = 'abcDEF0123456789'", "abcDEF0123456789", "['OPENAI_API_KEY'] = '[REDACTED]'"),
    ("GET https://s3.amazonaws.com/b/k?X-Amz-Signature=9f86d081884c7d65&X-Amz-Expires=60", "9f86d081884c7d65",
     "X-Amz-Signature=[REDACTED]&X-Amz-Expires=60"),
    (f"wandb login {WANDB}", WANDB, "wandb login [REDACTED]"),
    ("GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbCdEf0123%2Bxyz&se=2024", "AbCdEf0123%2Bxyz",
     "&sig=[REDACTED]&se=2024"),  # an Azure SAS: no name, no shape, only `sig=`
    ("retrying request with Bearer abcdef0123456789xyz", "abcdef0123456789xyz", "with Bearer [REDACTED]"),
    ("CLIENT_SECRET=Zk29fjQ01x", "Zk29fjQ01x", "CLIENT_SECRET=[REDACTED]"),
    ("DOCKER_CREDENTIALS=u1:Zk29fjQ01x", "u1:Zk29fjQ01x", "DOCKER_CREDENTIALS=[REDACTED]"),
    ("machine api.wandb.ai login user password 9c1f0a2b3c4d5e6f", "9c1f0a2b3c4d5e6f", "login user password [REDACTED]"),
]


@pytest.mark.parametrize("line,secret,kept", SECRET_LINES, ids=[s[2][:30] for s in SECRET_LINES])
def test_secret_value_is_replaced_and_its_name_kept(line, secret, kept):
    out = redact_secrets(line)
    assert secret not in out
    assert kept in out
    assert SECRET_MARK in out


NEAR_MISSES = [
    "TOKENIZERS_PARALLELISM=false",
    "max_new_tokens=512",
    "MAX_TOKENS=4096",
    "num_tokens: 512",
    "NCCL_IB_GID_INDEX=3",
    "NCCL_IB_PKEY=0",
    "torchrun train.py --num-tokens 4096 --max-tokens=1e6",
    "NCCL version 2.21.5+cuda12.4",
    "2024-11-05 12:34:56,789 - INFO - step 100 loss=2.345 tokens/s=12345.6",
    "[rank3]:[E1105 12:00:00.123456 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout",
    "HF_TOKEN_PATH=/root/.cache/huggingface/token",
    "PWD=/workspace/megatron",
    "use_auth_token=True, trust_remote_code=False",
    "TrainingArguments(hub_token=<HUB_TOKEN>, hub_model_id=None)",
    "HF_TOKEN=$HF_TOKEN srun python train.py",
    "_IncompatibleKeys(missing_keys=['lm_head.weight'], unexpected_keys=[])",
    "Unexpected key: model.layers.0.self_attn.q_proj.weight",
    'eos_token: "</s>", pad_token: <pad>, unk_token=[UNK]',
    "tokenizer.pad_token = tokenizer.eos_token",
    "KeyError: 'input_ids'",
    "max_num_batched_tokens=8192 max_model_len=4096",
    "  hf_token ........................................ None",
    "Bearer authentication failed for user",
    "git clone ssh://git@github.com:22/org/repo.git",
    "https://artifactory.example.com:8443/simple/torch/",
    "sk-learn is not a package; scikit-learn is",
]


@pytest.mark.parametrize("line", NEAR_MISSES)
def test_near_misses_stay_untouched(line):
    r = Redactor()
    assert r.redact(line) == line
    assert r.secrets_found == 0


def test_env_dump_counts_and_keeps_everything_else():
    dump = "\n".join([
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
        f"HF_TOKEN={HF}",
        "TOKENIZERS_PARALLELISM=false",
        f"WANDB_API_KEY={WANDB}",
        "NCCL_IB_GID_INDEX=3",
        f"AWS_ACCESS_KEY_ID={AWS_ID}",
        f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        "MASTER_PORT=29500",
    ])
    r = Redactor()
    out = r.redact(dump)
    assert r.secrets_found == 4
    lines = out.splitlines()
    assert lines == [
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
        "HF_TOKEN=[REDACTED]",
        "TOKENIZERS_PARALLELISM=false",
        "WANDB_API_KEY=[REDACTED]",
        "NCCL_IB_GID_INDEX=3",
        "AWS_ACCESS_KEY_ID=[REDACTED]",
        "AWS_SECRET_ACCESS_KEY=[REDACTED]",
        "MASTER_PORT=29500",
    ]
    assert r.redact(out) == out  # idempotent
    assert r.secrets_found == 4


def test_pem_block_is_replaced_whole_and_line_count_kept():
    text = "\n".join([
        "+ cat /root/.ssh/id_rsa",
        "-----BEGIN RSA PRIVATE KEY-----",
        *PEM_BODY,
        "-----END RSA PRIVATE KEY-----",
        "[rank0]: step 1 loss 2.3",
    ])
    r = Redactor()
    out = r.redact(text)
    assert all(b not in out for b in PEM_BODY)
    assert "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n" in out
    assert "-----END RSA PRIVATE KEY-----\n[rank0]: step 1 loss 2.3" in out
    assert out.count("\n") == text.count("\n")
    assert r.secrets_found == 1
    assert r.redact(out) == out and r.secrets_found == 1


def test_pem_in_service_account_json_and_truncated():
    sa = ('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n' + PEM_BODY[0]
          + '\\n-----END PRIVATE KEY-----\\n"}')
    assert PEM_BODY[0] not in redact_secrets(sa)
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n"
    out = redact_secrets(cut + "srun: error: task 0 killed")
    assert all(b not in out for b in PEM_BODY) and out.endswith("srun: error: task 0 killed")


def test_secrets_found_counts_each_value():
    r = Redactor()
    r.redact(f"HF_TOKEN={HF} --hf-token abc123XYZ")
    r.redact("Authorization: Bearer abcdef0123456789xyz")
    assert r.secrets_found == 3


# --- hosts -----------------------------------------------------------------------------------------------------------

NCCL_LOG = "\n".join([
    "[default0]:node-17:1234:1290 [0] NCCL INFO Bootstrap : Using eth0:10.0.3.17<0>",
    "[default3]:node-18:2231:2290 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.3.18<0>",
    "MASTER_ADDR=node-17 MASTER_PORT=29500",
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98). 0.0.0.0:29500",
    "connecting to localhost:29500 (127.0.0.1) and fe80::1ff:fe23:4567:890a",
    "srun: error: node-18: task 11: Exited with exit code 1",
    "NCCL version 2.21.5+cuda12.4 at 2024-11-05 12:34:56,789 [rank3]:[E1105 12:00:00.123]",
])


def test_nccl_prefix_host_and_ips_are_masked():
    r = Redactor(hosts=True)
    out = r.redact(NCCL_LOG)
    for real in ("node-17", "node-18", "10.0.3.17", "10.0.3.18", "fe80::1ff:fe23:4567:890a"):
        assert real not in out
    assert "[default0]:host-1:1234:1290 [0] NCCL INFO" in out
    assert "MASTER_ADDR=host-1 " in out  # the same node, the same placeholder
    assert "srun: error: host-2: task 11" in out
    assert "eth0:ip-1<0>" in out and "eth0:ip-2<0>" in out
    # never masked: loopback, any-address, versions, timestamps
    for kept in ("localhost:29500", "127.0.0.1", "0.0.0.0:29500", "[::]:29500", "NCCL version 2.21.5+cuda12.4",
                 "2024-11-05 12:34:56,789", "[E1105 12:00:00.123]"):
        assert kept in out


def test_host_mapping_is_consistent_across_calls_and_unmask_round_trips():
    r = Redactor(hosts=True, known_hosts=["gpu-a100-03", "gpu-a100-03.cluster.local"])
    first = r.redact(NCCL_LOG)
    second = r.redact("node-18 timed out talking to 10.0.3.17; gpu-a100-03.cluster.local and gpu-a100-03 are fine")
    # longest name first: the FQDN is one host (host-3), not host-4 + '.cluster.local'
    assert second == "host-2 timed out talking to ip-1; host-3 and host-4 are fine"
    assert r.unmask(first) == NCCL_LOG
    assert r.unmask(second) == ("node-18 timed out talking to 10.0.3.17; "
                                "gpu-a100-03.cluster.local and gpu-a100-03 are fine")


def test_hosts_are_whole_words():
    r = Redactor(hosts=True, known_hosts=["node-1"])
    text = "node-1 failed; node-10 and node-1-ib and xnode-1 are other names; node-1.cluster too"
    out = r.redact(text)
    assert out == "host-1 failed; node-10 and node-1-ib and xnode-1 are other names; host-1.cluster too"
    assert r.unmask(out) == text


def test_unmask_restores_hosts_but_never_secrets():
    r = Redactor(hosts=True)
    out = r.redact(f"node-17:1:2 [0] NCCL WARN HF_TOKEN={HF}")
    assert r.unmask(out) == "node-17:1:2 [0] NCCL WARN HF_TOKEN=[REDACTED]"


def test_literal_placeholder_in_logs_is_not_reused():
    r = Redactor(hosts=True, known_hosts=["node-9"])
    text = "cluster names: host-1 host-2; node-9 failed"
    out = r.redact(text)
    assert out == "cluster names: host-1 host-2; host-3 failed"
    assert r.unmask(out) == text


def test_hosts_off_by_default_and_localhost_never_masked():
    assert Redactor().redact(NCCL_LOG) == NCCL_LOG
    r = Redactor(hosts=True, known_hosts=["localhost", "127.0.0.1"])
    assert r.redact("localhost 127.0.0.1 0.0.0.0 ::1") == "localhost 127.0.0.1 0.0.0.0 ::1"


@pytest.mark.parametrize("line", [
    "NCCL version 2.21.5+cuda12.4",
    "driver 535.104.05 cuda 12.2.140.1.5",
    "v1.2.3.4",
    "12:34:56.789",
    "mac aa:bb:cc:dd:ee:ff",
    "at c10::add( x[1::2]",
    "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout",
])
def test_ip_patterns_stay_conservative(line):
    assert Redactor(hosts=True).redact(line) == line


def test_large_text_is_fast():
    line = (f"[default3]:node-%d:1234:1290 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC 10.0.%d.%d "
            f"step=%d loss=2.3 max_new_tokens=512 HF_TOKEN={HF}")
    text = "\n".join(line % (i % 64, i % 200, i % 250, i) for i in range(500))  # ~90k characters
    pathological = "a-" * 20000 + "--a" * 10000 + ":" * 20000 + "0:" * 20000
    r = Redactor(hosts=True, known_hosts=[f"gpu-{i:03d}" for i in range(500)])
    t = time.perf_counter()
    out = r.redact(text)
    r.redact(pathological)
    assert time.perf_counter() - t < 3.0
    assert HF not in out and r.secrets_found == 500
    assert r.unmask(out) == text.replace(HF, SECRET_MARK)


def test_a_line_that_is_only_base64_is_a_key_body_seen_alone():
    """A PEM body line on its own (a grep hit, a window that cut the BEGIN line off): redacted whole."""
    r = Redactor()
    body = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
    assert r.redact(body) == SECRET_MARK and r.redact(f"[rank0]: {body}") == f"[rank0]: {SECRET_MARK}"
    for keep in ("-" * 60, "step 100 loss 2.31 " * 3, "a" * 50):
        assert r.redact(keep) == keep


# --- the pre-check and the plain-data walk: the fast paths redact exactly what the full ones do ---------------------

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT.parent / "shared" / "incidents"


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", "replace").splitlines()


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """Every distinct line of the bundled cases (digit runs folded to one `0`: ranks, stamps and pids make 107 k
    distinct lines of ~5 k shapes, and the full pattern costs ~0.5 µs a character) and of the shared incidents."""
    cases = {re.sub(r"\d+", "0", line) for p in (ROOT / "cases").rglob("*") if p.is_file() for line in _lines(p)}
    incidents = {line for p in INCIDENTS.rglob("*") if p.is_file() for line in _lines(p)}
    assert len(cases) > 1000
    return sorted(cases | incidents)


SECRET_TEXTS = [line for line, _, _ in SECRET_LINES] + [
    NCCL_LOG,
    "\n".join(["+ cat /root/.ssh/id_rsa", "-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY, "-----END RSA PRIVATE KEY-----"]),
    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\nsrun: error: task 0 killed",
    f"[rank0]: {PEM_BODY[0]}",
    "API_\u212aEY=abc123XYZ",  # the Kelvin sign: IGNORECASE takes it for `k`, str.lower does not
    "DB_PA\u017fSWORD=hunter2",  # the long s, the same
    "HF_ToKeN=abc123XYZ --Api-Key xyz123secret BEARER abcdef0123456789xyz",
]


def _full_path(text: str, hosts: bool = False) -> tuple[str, int]:
    """Redactor.redact with the pre-check forced on: the path every string took before it existed."""
    with mock.patch.object(redact_module, "_may_hold_secret", lambda t: True):
        r = Redactor(hosts=hosts)
        return r.redact(text), r.secrets_found


def _fast_path(text: str, hosts: bool = False) -> tuple[str, int]:
    r = Redactor(hosts=hosts)
    return r.redact(text), r.secrets_found


@pytest.mark.slow
def test_precheck_never_skips_a_line_the_full_pattern_matches(corpus):
    texts = corpus + SECRET_TEXTS + NEAR_MISSES
    assert [t for t in texts if not _may_hold_secret(t) and _SECRET_RE.search(t)] == []
    assert all(_fast_path(t) == _full_path(t) for t in texts if _may_hold_secret(t))  # the others are unchanged


@pytest.mark.slow
def test_precheck_skips_most_log_lines_and_no_secret(corpus):
    assert sum(map(_may_hold_secret, corpus)) < len(corpus) / 20
    assert all(_may_hold_secret(line) for line, _, _ in SECRET_LINES)


# Pieces of secrets and of their near misses, glued with log-like text, case-flipped and with letters swapped for
# the non-ASCII letters IGNORECASE folds onto ASCII ones.
_PIECES = [*SECRET_TEXTS, *NEAR_MISSES, HF, WANDB, ANTHROPIC, OPENAI, GITHUB, SLACK, GOOGLE, JWT, AWS_ID, AWS_SECRET,
           *PEM_BODY, "HF_TOKEN", "api_key", "x-api-key", "Authorization", "passwd", "pwd", "credentials", "--hf-token",
           "Bearer ", "wandb login ", "machine h login u password ", "?X-Amz-Signature=", "&sig=", "https://u:",
           "@host/simple", "s3://bucket/k", "sk-", "ghp_", "hf_", "AKIA", "ASIA", "AIza", "eyJ", "-----BEGIN ",
           "PRIVATE KEY-----", "=", ": ", " ", "\n", "'", '"', "[rank0]: "]
_FOLDS = str.maketrans({"k": "\u212a", "K": "\u212a", "s": "\u017f", "S": "\u017f", "i": "\u0131", "I": "\u0130"})


@st.composite
def _secretish(draw) -> str:
    parts = draw(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(string.printable, max_size=12)), max_size=6))
    text = "".join(draw(st.sampled_from([str, str.upper, str.lower, str.swapcase]))(p) for p in parts)
    if draw(st.booleans()):  # fold the letters of one stretch
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, len(text)))
        text = text[:a] + text[a:b].translate(_FOLDS) + text[b:]
    return text


@settings(max_examples=400, deadline=None)
@given(_secretish(), st.booleans())
def test_precheck_agrees_with_the_full_pattern_on_secret_shapes(text, hosts):
    assert _may_hold_secret(text) or not _SECRET_RE.search(text)
    assert _fast_path(text, hosts) == _full_path(text, hosts)


def _general(v):
    """The same tree in containers the plain-data fast path leaves to the general walk (dict subclass, tuples)."""
    if isinstance(v, dict):
        return OrderedDict((_general(k), _general(x)) for k, x in v.items())
    return tuple(map(_general, v)) if isinstance(v, list) else v


def _scan_like(lines: list[str]) -> dict:
    """A report shaped like `scan --json`: per-file hits with text, numbers, flags, nested lists, counts by text."""
    files = [{"path": f"node{i}/rank_{i}.log", "ok": True, "bytes": 1 << 20, "stamp": None,
              "hits": [{"line": n, "text": t, "tags": ["nccl", t[:24]], "score": 0.5} for n, t in enumerate(chunk)]}
             for i, chunk in enumerate(lines[i:i + 7] for i in range(0, len(lines), 7))]
    return {"root": "bundle", "seconds": 1.5, "files": files, "patterns": {t[:40]: len(t) for t in lines},
            "notes": [[t] for t in lines[:50]], f"HF_TOKEN={HF}": 1, f"HF_TOKEN={OPENAI}": 2}  # both keys -> one


def test_plain_tree_walk_redacts_like_the_general_walk(corpus):
    lines = corpus[:300] + SECRET_TEXTS + corpus[300:600] + SECRET_TEXTS[:5]
    tree = _scan_like(lines)
    before = copy.deepcopy(tree)
    fast_r, general_r = Redactor(hosts=True), Redactor(hosts=True)
    fast, general = redact_tree(tree, fast_r), redact_tree(_general(tree), general_r)
    # the same strings, in the same order (hosts are numbered in order of first sight), counted the same
    assert json.dumps(fast) == json.dumps(general)
    assert fast_r.secrets_found == general_r.secrets_found > 0
    assert tree == before  # the input is not touched
    assert HF not in json.dumps(fast) and "host-1" in json.dumps(fast)
    plain = [f for f in tree["files"] if json.dumps(f) == json.dumps(redact_tree(f, Redactor(hosts=True)))]
    assert plain and all(redact_tree(f) is f for f in plain)  # nothing to redact: the same object, no copy


@pytest.mark.parametrize("depth", [1, 63, 64, 65, 66])
def test_plain_lists_are_walked_exactly_as_deep_as_other_containers(depth):
    as_list, as_tuple = [f"HF_TOKEN={HF}"], (f"HF_TOKEN={HF}",)
    for _ in range(depth):
        as_list, as_tuple = [as_list], (as_tuple,)
    out_list, out_tuple = redact_tree(as_list), redact_tree(as_tuple)
    for _ in range(depth):
        out_list, out_tuple = out_list[0], out_tuple[0]
    assert out_list == list(out_tuple)
    assert (out_list[0] == "HF_TOKEN=[REDACTED]") == (depth < 65)


class _Span(NamedTuple):
    rank: int
    text: str


@dataclasses.dataclass
class _Window:
    lines: list[str]
    span: _Span


def test_reports_objects_are_redacted_and_keep_their_types():
    """Pydantic models, dataclasses, NamedTuples and str enums: the general walk the analyses' own objects take.
    An enum member equal to a string seen earlier stays the member (Role.cascade, not the "cascade" seen first: a
    model's serializer warns about a plain string in an enum field)."""
    ev = Evidence(file="rank_3.log", line=12, text=f"[rank3]: export HF_TOKEN={HF}", rank=3)
    finding = Finding(id="env.token", summary="a token in the env dump", role=Role.cascade, ranks=[3],
                      facts={"cmd": f"--hf-token {HF}", "n": 1}, evidence=[ev])
    window = _Window(lines=["step 1", f"HF_TOKEN={HF}"], span=_Span(3, f"key {ANTHROPIC}"))
    report = ["cascade", finding, window, ("cascade", 7)]
    r = Redactor()
    out = redact_tree(report, r)
    assert HF not in repr(out) and ANTHROPIC not in repr(out[2].span)
    assert type(out[1].role) is Role and out[1].role is Role.cascade
    assert out[1].evidence[0].text == "[rank3]: export HF_TOKEN=[REDACTED]" and out[1].ranks is finding.ranks
    assert type(out[2].span) is _Span and out[2].span.rank == 3
    assert out[3] is report[3] and r.secrets_found == 4
    assert finding.evidence[0] is ev and HF in ev.text  # the originals are untouched


@pytest.mark.parametrize("line, kept", [
    ("DB_PASS=hunter2x", "DB_PASS="), ("pass=hunter2x", "pass="), ("user_pass: s3cr3tvalue", "user_pass: "),
    ("Cookie: session=abc123def; theme=dark", "Cookie: "),
    ("HF_TOKEN\thf_abcdefghijklmnopqrstuvwxyz0123456789", "HF_TOKEN\t"),
    ("AWS_SECRET_ACCESS_KEY\twJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY\t"),
    ("[default1]:[rank5]: MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj", "[default1]:[rank5]: "),
])
def test_secret_forms_that_got_past_the_redactor(line, kept):
    """Issue 30: `pass=`, `Cookie:`, tab-separated keys and a PEM body line behind a log prefix leaked."""
    assert redact_secrets(line).startswith(kept + "[REDACTED]"), redact_secrets(line)


@pytest.mark.parametrize("line", [
    "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /default_pg/0//cpu//0/1",
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
    "store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)",
    "compass: north", "bypass=abc", "max_tokens\t512", "passed: 12 tests"])
def test_what_is_not_a_secret_stays(line):
    """The store keys a c10d timeout names are a proof, not a key (issue 30: they were masked)."""
    assert redact_secrets(line) == line


def test_diff_templates_are_redacted_before_the_numbers_are_masked():
    """Issue 30: masking digits first turned AKIA…7EXAMPLE into AKIA…<NUM>EXAMPLE, which the redactor no longer
    knew, so `diff` and the agent's rank_diff carried keys out."""
    from trainlog_debugger.tools.rankdiff.mask import template_of
    for line in ("[rank3]: export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
                 "[rank3]: git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/org/repo",
                 "[rank3]: auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"):
        t = template_of(line)
        assert "[REDACTED]" in t and "AKIAIOSFODNN" not in t and "ghp_abcdefgh" not in t and "eyJzdWIi" not in t, t


@pytest.mark.slow
def test_redaction_changes_no_line_of_any_case_that_holds_no_secret():
    """Issue 30: a proof line must reach the report as the log wrote it. Over every bundled case and real incident,
    every line the redactor changes is one that holds a secret form (a name that says so, a token shape, a URL
    password, a base64 key line); the store-timeout `keys: /default_pg/...` line was masked before."""
    root = Path(__file__).resolve().parents[1] / "cases"
    secretish = re.compile(r"(?i)token|key|secret|pass|pwd|credential|auth|cookie|bearer|signature|sig=|wandb|"
                           r"://[^\s/@]*:[^\s/@]*@|\b(?:hf|gh[pousr]|sk|xox[abprs]|glpat|pypi|npm)[_-]|AKIA|ASIA|AIza|"
                           r"eyJ|^[\s\[\]\w:]*[A-Za-z0-9+/]{40,}={0,2}\s*$")
    changed = []
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "truth.yaml" and p.stat().st_size < 5e7):
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if redact_secrets(line) != line and not secretish.search(line):
                changed.append(f"{f.relative_to(root)}:{n}: {line[:120]}")
    assert not changed, "\n".join(changed[:20])

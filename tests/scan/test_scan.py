"""The one-pass scan on realistic bundles: every rank, exact line numbers, both engines, any chunk size."""

from __future__ import annotations

import gzip
import json
import tarfile

import pytest

from trainlog_debugger.eval.synth.generate import data_loading_straggler, write_case
from trainlog_debugger.tools.scan import filepass as filescan
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.scan.engine import available_engines
from trainlog_debugger.tools.scan.driver import scan_bundle


def _scan(path, **kw):
    with open_bundle(path) as b:
        return scan_bundle(b, **kw)


def _hits(res):
    return sorted((f.rel, h.line, h.pattern, h.rank) for f in res.files for h in f.hits)


@pytest.fixture(scope="module")
def straggler16(tmp_path_factory):
    d = tmp_path_factory.mktemp("b16") / "bundle"
    job, _ = data_loading_straggler(ranks=16, culprit=11, seed=3)
    write_case(d, job, {})
    return d


def test_every_rank_seen_and_outlier_found(straggler16):
    res = _scan(straggler16)
    assert res.coverage.seen_ranks == list(range(16))
    assert res.coverage.expected_ranks == 16 and res.coverage.missing_ranks == []
    pats = {p.id: p for p in res.patterns}
    assert pats["pytorch.watchdog_timeout"].missing_ranks == [11]
    assert pats["pytorch.dump_observed"].only_ranks == [11]
    assert res.ranks[11].retry["state"] == "exhausted"
    assert res.ranks[0].retry["state"] == "recovering"
    # rank→node is recorded from lines that state both (NCCL host prefix + [rankN]:), never guessed
    assert res.rank_nodes[11].node == "gpu-node-18"


def test_evidence_is_the_raw_line(straggler16):
    res = _scan(straggler16)
    for f in res.files:
        lines = (straggler16 / f.rel).read_text().split("\n")
        for h in f.hits:
            assert lines[h.line - 1] == h.text


@pytest.mark.skipif("hyperscan" not in available_engines(), reason="hyperscan not installed")
def test_engines_agree(straggler16):
    assert _hits(_scan(straggler16, engine="hyperscan")) == _hits(_scan(straggler16, engine="re"))


def test_results_do_not_depend_on_chunk_size(straggler16, monkeypatch):
    whole = _scan(straggler16)
    monkeypatch.setattr(filescan, "CHUNK", 1000)
    monkeypatch.setattr(filescan, "HEAD", 500)
    small = _scan(straggler16)
    assert _hits(small) == _hits(whole)
    assert [f.lines for f in small.files] == [f.lines for f in whole.files]
    assert small.coverage.seen_ranks == whole.coverage.seen_ranks


def _rank_files(d, n, drop=(), world=True):
    d.mkdir(parents=True, exist_ok=True)
    for r in range(n):
        if r in drop:
            continue
        lines = []
        if world and r == 0:
            lines.append(f"[rank0]:[I1105 12:00:00.000000001 train.py:10] using world size: {n}")
        for i in range(5):
            lines.append(f"[rank{r}]:[I1105 12:0{i}:00.000000001 train.py:20] step {i} loss 2.{r}")
        (d / f"rank_{r}.log").write_text("\n".join(lines) + "\n")
    return d


def test_missing_rank_file_is_reported(tmp_path):
    res = _scan(_rank_files(tmp_path / "b", 8, drop=(3,)))
    assert res.coverage.expected_ranks == 8
    assert res.coverage.expected_from == "world size in the logs"
    assert res.coverage.missing_ranks == [3]


def test_a_part_of_the_world_is_not_its_size(tmp_path):
    """torchrun's rendezvous result states `group_world_size=2` (its agents: one per node), LOCAL_WORLD_SIZE one
    node's ranks and Megatron its parallel groups' sizes: none of them is the job's world size (16 ranks seen were
    "ranks above the expected world size: 2-15")."""
    d = _rank_files(tmp_path / "b", 16, world=False)
    api = "I1203 04:00:02.990000 3300 torch/distributed/elastic/agent/server/api.py:525]"
    (d / "agent.log").write_text("\n".join([
        f"{api} [default] Rendezvous complete for workers. Result:", f"{api}   restart_count=0",
        f"{api}   master_addr=ib-c06", f"{api}   group_rank=0", f"{api}   group_world_size=2",
        "LOCAL_WORLD_SIZE=8", " tensor_model_parallel_world_size=4"]) + "\n")
    res = _scan(d)
    assert res.coverage.expected_ranks == 16 and res.coverage.expected_from != "world size in the logs"
    for stated in ("WORLD_SIZE=16", "Namespace(distributed_world_size=16, fp16=True)", "args.world_size = 16"):
        (d / "agent.log").write_text(f"{api}   group_world_size=2\n{stated}\n")
        res = _scan(d)
        assert (res.coverage.expected_ranks, res.coverage.expected_from) == (16, "world size in the logs"), stated


def test_1024_ranks_interleaved_exact_coverage(tmp_path):
    """One rank appears only in the middle of an interleaved file: the label count check must still find it."""
    d = tmp_path / "b"
    d.mkdir()
    for node in range(128):
        lines = []
        for step in range(3):
            for lr in range(8):
                r = node * 8 + lr
                if r == 517 and step != 1:
                    continue
                lines.append(f"[rank{r}]:[I1105 12:0{step}:00.000000001 train.py:20] step {step}")
        (d / f"node{node:03d}.log").write_text("\n".join(lines) + "\n")
    res = _scan(d)
    assert res.coverage.seen_ranks == list(range(1024))
    assert res.coverage.missing_ranks == []


def test_traceback_gets_its_final_exception(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    (d / "rank_3.log").write_text(
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/workspace/train.py", line 88, in <module>\n'
        "[rank3]:     loss = model(batch)\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity "
        "of 79.10 GiB of which 1.23 GiB is free.\n")
    res = _scan(d)
    tb = [h for f in res.files for h in f.hits if h.pattern == "python.traceback"][0]
    assert tb.fields["exception"] == "torch.OutOfMemoryError"
    assert tb.fields["exception_line"] == 4
    oom = [h for f in res.files for h in f.hits if h.pattern == "cuda.oom"][0]
    assert (oom.rank, oom.fields["gpu"], oom.fields["requested"]) == (3, 3, "2.00 GiB")


_RAY_WRAPPED = """Traceback (most recent call last):
  File "/workspace/verl/verl/trainer/main_ppo.py", line 64, in run_ppo
    ray.get(runner.run.remote(config))
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 930, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() (pid=66120, ip=10.3.1.4, actor_id=52f3d8b0c1e9)
  File "/workspace/verl/verl/trainer/ppo/ray_trainer.py", line 1047, in fit
    for batch_dict in self.train_dataloader:
  File "/usr/local/lib/python3.10/dist-packages/torch/_utils.py", line 733, in reraise
    raise exception
RuntimeError: Caught RuntimeError in DataLoader worker process 5.
Original Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/fetch.py", line 52, in <listcomp>
    data = [self.dataset[idx] for idx in possibly_batched_index]
  File "/workspace/verl/verl/utils/dataset/rl_dataset.py", line 308, in __getitem__
    raise RuntimeError(f"Prompt length {len(raw_prompt_ids)} is longer than {self.max_prompt_length}.")
RuntimeError: Prompt length 1387 is longer than 1024.

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def test_a_wrappers_traceback_ends_at_the_exception_it_carries(tmp_path):
    """Ray's RayTaskError line is followed by the remote task's frames, and a DataLoader worker's re-raised error by
    `Original Traceback`: the traceback ends at the exception after them (the cause, raised in the dataset's
    __getitem__), not at the first wrapper's line. A chained exception after a blank line stays its own."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "console.log").write_text(_RAY_WRAPPED + "\nDuring handling of the above exception, another exception "
                                   "occurred:\n\nTraceback (most recent call last):\n  File \"x.py\", line 1, in "
                                   "<module>\nSystemExit: 1\n")
    res = _scan(d)
    tbs = sorted((h for f in res.files for h in f.hits if h.pattern == "python.traceback"), key=lambda h: h.line)
    assert tbs[0].fields["exception"] == "RuntimeError"
    assert tbs[0].fields["message"] == "Prompt length 1387 is longer than 1024."
    assert tbs[0].fields["exception_line"] == 17 and tbs[0].fields["frames"][-1].endswith("rl_dataset.py:__getitem__")
    assert tbs[-1].fields["exception"] == "SystemExit"


def test_an_exception_that_carries_nothing_ends_its_traceback_even_before_frames(tmp_path):
    """Two processes' tracebacks interleaved in one unlabelled console: the OOM line is followed by the other's
    frames, but it is no carrier (Ray's or the DataLoader's re-raise): the first traceback ends at the OOM."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "console.log").write_text("\n".join([
        "Traceback (most recent call last):", "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 88, in <module>', '  File "/workspace/train.py", line 88, in <module>',
        "    main()", "    main()", '  File "/workspace/train.py", line 61, in main', "    loss = model(batch)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        '  File "/workspace/train.py", line 70, in main', "    dist.all_reduce(t)",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited"]) + "\n")
    res = _scan(d)
    tb = min((h for f in res.files for h in f.hits if h.pattern == "python.traceback"), key=lambda h: h.line)
    assert tb.fields["exception"] == "torch.OutOfMemoryError" and tb.fields["exception_line"] == 9


def test_cut_traceback_keeps_its_frames_and_calls(tmp_path):
    """A paste that stops inside its traceback still says where the code was: each frame's function and the source
    line it was running (a `with` that entered a barrier shows only as contextlib's __enter__ otherwise)."""
    d = tmp_path / "b"
    d.mkdir()
    (d / "combined.log").write_text(
        "Traceback (most recent call last):\n"
        '  File "/work/sft.py", line 245, in <module>\n'
        "    trainer = SFTTrainer(\n"
        "              ^^^^^^^^^^^\n"
        '  File "/usr/lib/python3.11/contextlib.py", line 137, in __enter__\n'
        "    return next(self.gen)\n"
        "           ^^^^^^^^^^^^^^\n")
    tb = [h for f in _scan(d).files for h in f.hits if h.pattern == "python.traceback"][0]
    assert "exception" not in tb.fields
    assert tb.fields["frames"] == ["/work/sft.py:<module>", "/usr/lib/python3.11/contextlib.py:__enter__"]
    assert tb.fields["calls"] == ["trainer = SFTTrainer(", "return next(self.gen)"]


@pytest.mark.parametrize("chunk", [1 << 20, 1200, 1500])
def test_a_traceback_cut_by_a_chunk_is_not_a_cut_paste(tmp_path, monkeypatch, chunk):
    """Frames without an exception mean a paste cut inside its traceback, so only the file's end may cut one: a
    traceback that crosses a read buffer's end is whole in the file, and never reads as cut there."""
    monkeypatch.setattr(filescan, "CHUNK", chunk)
    lines = [f"[rank3]: step {i} loss 2.{i}" for i in range(40)] + ["[rank3]: Traceback (most recent call last):"]
    for i in range(8):
        lines += [f'[rank3]:   File "/app/m{i}.py", line {i}, in f{i}', f"[rank3]:     call_{i}()"]
    (tmp_path / "rank_3.log").write_text("\n".join(lines + ["[rank3]: RuntimeError: boom"]) + "\n")
    tb = [h for f in _scan(tmp_path).files for h in f.hits if h.pattern == "python.traceback"][0]
    assert "exception" in tb.fields or "frames" not in tb.fields, tb.fields


def test_silent_first_rank(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    for r in range(4):
        last = 10 if r == 2 else 40
        lines = [f"[rank{r}]:[I1105 12:{m:02d}:00.000000001 train.py:20] step {m}" for m in range(0, last + 1, 5)]
        (d / f"rank_{r}.log").write_text("\n".join(lines) + "\n")
    res = _scan(d)
    assert [s["rank"] for s in res.silent_first] == [2]
    assert res.ranks[2].last_line.line == 3


def test_gz_tar_and_plain_give_the_same_hits(straggler16, tmp_path):
    plain = _hits(_scan(straggler16))
    tgz = tmp_path / "logs.tar.gz"
    with tarfile.open(tgz, "w:gz") as t:
        for p in sorted(straggler16.iterdir()):
            t.add(p, arcname=f"logs/{p.name}")
    from_tar = [(rel.split("!logs/", 1)[1], *rest) for rel, *rest in _hits(_scan(tgz))]
    assert sorted(from_tar) == plain
    gzdir = tmp_path / "gz"
    gzdir.mkdir()
    for p in straggler16.iterdir():
        (gzdir / (p.name + ".gz")).write_bytes(gzip.compress(p.read_bytes()))
    from_gz = [(rel[:-3], *rest) for rel, *rest in _hits(_scan(gzdir))]
    assert sorted(from_gz) == plain


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    body = "".join(f"[rank1]:[E1105 12:00:{i % 60:02d}.000000001 x.cpp:1] CUDA error: an illegal memory access was "
                   f"encountered {i}\n" for i in range(20000)).encode()
    blob = gzip.compress(body)
    (d / "rank_1.log.gz").write_bytes(blob[: len(blob) // 2])
    _rank_files(d, 1, world=False)
    res = _scan(d)
    assert any("truncated gzip" in n for n in res.notes) or any("truncated gzip" in s["reason"] for s in res.coverage.skipped)


def test_overlong_line_is_scanned_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(filescan, "CHUNK", 4096)
    d = tmp_path / "b"
    d.mkdir()
    (d / "rank_0.log").write_text("x" * 20000 + " CUDA error: misaligned address\n[rank0]: done\n")
    res = _scan(d)
    assert any("longer than" in n for n in res.notes)
    assert res.files[0].lines == 2


def test_cloud_logging_entries_attributed_to_task(tmp_path):
    entries = [
        {"insertId": "a1", "logName": "projects/p/logs/workerpool0-1",
         "resource": {"type": "ml_job", "labels": {"job_id": "123", "project_id": "p", "task_name": "workerpool0-1"}},
         "severity": "ERROR", "timestamp": "2024-11-05T12:00:01.123456789Z",
         "textPayload": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                        "capacity of 79.10 GiB of which 1.23 GiB is free."},
        {"insertId": "a2", "logName": "projects/p/logs/workerpool0-0",
         "resource": {"type": "ml_job", "labels": {"job_id": "123", "project_id": "p", "task_name": "workerpool0-0"}},
         "severity": "INFO", "timestamp": "2024-11-05T12:00:00.5Z", "textPayload": "step 10 loss 2.0"},
    ]
    d = tmp_path / "b"
    d.mkdir()
    (d / "export.json").write_text(json.dumps(entries, indent=2))
    res = _scan(d)
    assert res.files[0].kind == "cloud_logging"
    oom = [h for f in res.files for h in f.hits if h.pattern == "cuda.oom"][0]
    assert oom.node == "workerpool0-1"
    assert oom.time.has_zone and oom.time.iso().startswith("2024-11-05T12:00:01")


@pytest.mark.parametrize("line,rank,node", [
    (" 3: [rank3]:[E1105 12:00:01.000000001 x.cpp:1] CUDA error: an illegal memory access was encountered", 3, None),
    ("10.3.0.41: [rank22]: RuntimeError: CUDA error: an illegal memory access was encountered", 22, "10.3.0.41"),
    ("(RayWorkerWrapper pid=270291, ip=10.175.94.190) RuntimeError: CUDA error: an illegal memory access was "
     "encountered", None, "10.175.94.190"),
    ("[default2]:[rank2]:[E1105 12:00:01.000000001 x.cpp:1] CUDA error: an illegal memory access was encountered", 2, None),
    ("node2: [rank9]: RuntimeError: CUDA error: an illegal memory access was encountered", 9, "node2"),
])
def test_prefix_styles_attribute_hits(tmp_path, line, rank, node):
    d = tmp_path / "b"
    d.mkdir()
    (d / "job.log").write_text("starting\n" + line + "\n")
    res = _scan(d)
    h = [h for f in res.files for h in f.hits if h.pattern == "cuda.error"][0]
    assert (h.rank, h.node, h.line) == (rank, node, 2)


def test_source_kinds_and_their_patterns(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    (d / "kern.log").write_text("Jan 22 18:38:35 host kernel: NVRM: Xid (PCI:0000:81:00): 79, pid='<unknown>', "
                                "name=<unknown>, GPU has fallen off the bus.\n")
    (d / "aistarget.ais-target-3.INFO.0821-191752.4171").write_text(
        "Started up at 2024/08/21 19:17:52, host ais-target-3, go1.22.3 for linux/amd64\n"
        "W 19:17:52.204518 moss:589 x-get-batch[Xf3kW9p0q] pending: 130 resource pressure: load=critical sleep=100ms "
        "[mem=critical dsk=high] throttle: 100ms\n")
    (d / "slurm-4891784.out").write_text("slurmstepd: error: *** STEP 4891784.0 ON gpu-node-17 CANCELLED AT "
                                         "2024-11-05T12:34:56 DUE TO TIME LIMIT ***\n")
    res = _scan(d)
    kinds = {f.rel: f.kind for f in res.files}
    assert kinds["kern.log"] == "kernel"
    assert kinds["aistarget.ais-target-3.INFO.0821-191752.4171"] == "ais_target"
    assert kinds["slurm-4891784.out"] == "slurm"
    found = {p.id: p.first for p in res.patterns}
    assert found["kernel.xid"].file == "kern.log"
    assert found["ais.resource_pressure"].node == "ais-target-3"
    assert found["slurm.cancelled_time_limit"].time.iso() == "2024-11-05T12:34:56.000000"


@pytest.mark.parametrize("engine", available_engines())
def test_concurrent_scans_in_one_process_give_the_sequential_results(straggler16, engine):
    """Two threads scanning at once (the Slack bot's conversations) each use their own engine and Hyperscan scratch:
    no ScratchInUseError, and each result is exactly the one a scan alone gives."""
    import threading
    alone = _hits(_scan(straggler16, engine=engine, workers=1))
    results, errors = [], []

    def one():
        try:
            for _ in range(3):
                results.append(_hits(_scan(straggler16, engine=engine, workers=1)))
        except Exception as e:  # noqa: BLE001 - the test reports any failure of a thread
            errors.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 12 and all(r == alone for r in results)


@pytest.mark.parametrize("chunk", [1 << 20, 700])
def test_repeated_hits_kept_last_are_finished_like_the_first(tmp_path, monkeypatch, chunk):
    """Times and traceback facts are worked out only for hits that are kept (the first few per pattern and rank at
    once, the newest few when their buffer is done): the kept last ones carry the same time (inferred from the line
    before) and exception as the first ones, also when the ring spans several read buffers."""
    monkeypatch.setattr(filescan, "CHUNK", chunk)
    lines = []
    for i in range(12):
        lines += [f"[rank3]:2026-01-05 10:{i:02d}:00,123 INFO step {i}", "[rank3]:Traceback (most recent call last):",
                  '[rank3]:  File "/app/train.py", line 10, in <module>', f"[rank3]:RuntimeError: boom {i}"]
    (tmp_path / "rank_3.log").write_text("\n".join(lines) + "\n")
    res = _scan(tmp_path)
    tbs = [h for f in res.files for h in f.hits if h.pattern == "python.traceback"]
    assert [h.line for h in tbs] == [2 + 4 * i for i in (0, 1, 2, 3, 4, 7, 8, 9, 10, 11)]
    for h in tbs:
        i = (h.line - 2) // 4
        # a look-back stays inside its read buffer: with 700-byte reads the line before may lie in the previous one
        assert h.rank == 3 and (h.time is not None or chunk == 700)
        assert h.time is None or h.time.iso() == f"2026-01-05T10:{i:02d}:00.123000"
        assert h.fields.get("exception") == "RuntimeError" and h.fields.get("message") == f"boom {i}"
    assert sum(h.time is not None for h in tbs) >= (10 if chunk > 700 else 5)
    assert dict(res.files[0].counts)[("python.traceback", 3)] == 12


class _Pipe:
    """A stream that cannot seek (a pipe, a decompressor without seek): read() only."""

    def __init__(self, data: bytes):
        import io
        self._b = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._b.read(n)


@pytest.mark.parametrize("ends", [b"\n", b"\r"])
def test_seekable_and_pipe_streams_scan_alike(straggler16, ends):
    """The CR probe rewinds a seekable stream and prepends its bytes for one that cannot seek: both must give the
    same lines, hits and last lines, for LF and CR-only files alike."""
    from trainlog_debugger.tools.scan.engine import make_engine
    from trainlog_debugger.tools.sources import patterns
    import io
    data = (straggler16 / "rank11.log").read_bytes() if (straggler16 / "rank11.log").exists() else \
        next(p for p in sorted(straggler16.rglob("*")) if p.is_file() and p.stat().st_size > 10_000).read_bytes()
    data = b"x" * 60_000 + b"\n" + data  # lines after it straddle the probe's 64 KiB
    if ends == b"\r":
        data = data.replace(b"\n", b"\r")
    eng = make_engine(list(patterns()))
    a = filescan.FileScanner(eng).scan("r.log", "text", len(data), io.BytesIO(data))
    assert a.hits, "the straggler's log has catalog hits"
    assert ("carriage return only" in " ".join(a.notes)) == (ends == b"\r")
    # a pipe (probe prepended); a buffered stream, as Source.open gives (probed by peek); one whose reads come short
    # (the peek holds less than the probe and no line end: probed by a read and a seek back)
    for stream, sized in ((_Pipe(data), False), (io.BufferedReader(io.BytesIO(data), 1 << 16), True),
                          (io.BufferedReader(_Trickle(data), 1 << 16), True)):
        b = filescan.FileScanner(eng).scan("r.log", "text", len(data), stream, sized=sized)
        assert a.lines == b.lines > 50
        assert [(h.line, h.pattern, h.text) for h in a.hits] == [(h.line, h.pattern, h.text) for h in b.hits]
        assert {r: (ll.line, ll.text) for r, ll in a.last_lines.items()} == \
            {r: (ll.line, ll.text) for r, ll in b.last_lines.items()}
        assert a.notes == b.notes


class _Trickle:
    """A raw stream that gives at most 1,000 bytes a read (a slow pipe, a decompressor) and can seek."""

    def __init__(self, data: bytes):
        import io
        self._b = io.BytesIO(data)

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b) -> int:
        got = self._b.read(min(len(b), 1000))
        b[:len(got)] = got
        return len(got)

    def seek(self, pos, whence=0):
        return self._b.seek(pos, whence)

    def tell(self):
        return self._b.tell()

    @property
    def closed(self):
        return False


def test_multi_rank_tail_finds_every_ranks_last_line(tmp_path):
    """A per-node file: the reverse walk of its tail stops once every rank has its last line, so a rank that fell
    silent long before the others (rank 7, mapped from `[default7]:`) and an unmapped local rank (9) must still get
    theirs, with their true line numbers and times."""
    lines = [f"[default{r}]:[rank{r}]:[I1105 12:00:0{r}.000000 1 train.py:1] init" for r in range(8)]
    lines.append("[default9]:I1105 12:00:08.500000 1 side.py:1] helper started")
    silent9 = len(lines)
    lines.append("[default7]:[E1105 12:00:09.000000 1 loader.py:7] worker stalled on shard 17")
    silent7 = len(lines)
    for i in range(3000):
        r = i % 7
        lines.append(f"[default{r}]:[rank{r}]:[I1105 12:{10 + i // 600:02d}:{i % 60:02d}.000000 1 train.py:9] step {i}")
    data = ("\n".join(lines) + "\n").encode()
    (tmp_path / "node0.out").write_bytes(data)
    res = _scan(tmp_path)
    (f,) = res.files
    assert f.last_lines[7].line == silent7 and "worker stalled" in f.last_lines[7].text
    assert f.last_lines[7].time is not None and f.last_lines[7].time.second == 9
    assert f.last_local[9].line == silent9
    for r in range(7):
        assert f.last_lines[r].text.endswith(f"step {max(i for i in range(3000) if i % 7 == r)}")
    assert f.lines == len(lines)


def _corpus_lines(limit: int = 200_000):
    """Lines of the bundled cases and the public incidents (where present), for agreement checks."""
    import pathlib
    roots = [pathlib.Path(__file__).resolve().parents[2] / "cases", pathlib.Path("/work/shared/incidents")]
    n = 0
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else ():
            if p.is_file() and p.suffix not in (".gz", ".tar", ".zip", ".pickle", ".pkl") and p.stat().st_size < 50 << 20:
                for line in p.read_bytes().decode("utf-8", "replace").splitlines():
                    yield line
                    n += 1
                    if n >= limit:
                        return


PREFIXES = ["", "[rank3]:", "[default3]:", "[default3]:[rank3]:", "[rank3]:[rank5]:", "[trainer12]:[rank9]: ",
            " 3: ", " 3: [rank7]:", "[12]:", "node-2: ", "\x1b[31m[rank4]:", "[rank4]:\x1b[0m", "[rank9999999]:",
            "[rank2]:\r[rank6]:", "[rankx1]:[rank6]:", "(RayWorker pid=7, ip=10.0.0.1) [rank1]:"]


@pytest.mark.slow
def test_fast_rank_agrees_with_attribution():
    """The scan's shortcut for a line opening with `[rankN]:` must give the rank that full attribution gives, on
    real lines and on every wrapper combination (a disagreement would move a hit to another rank)."""
    from hypothesis import given, settings, strategies as st
    from trainlog_debugger.tools.scan.filepass import _FAST_RANK
    from trainlog_debugger.tools.scan.labels import bounded_attribution
    from trainlog_debugger.tools.ranks import plausible_rank

    def check(line: str) -> bool:
        m = _FAST_RANK.match(line)
        if m is None or not plausible_rank(int(m.group(1))):
            return False
        assert bounded_attribution(line).rank == int(m.group(1)), line
        return True

    fast = sum(check(pre + body) for body in _corpus_lines(60_000) for pre in ("", PREFIXES[3]))
    assert fast > 1000
    for pre in PREFIXES:
        check(pre + "[E1105 12:00:00.000000 1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0 Rank 5] Watchdog")

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(PREFIXES), max_size=3), st.text(max_size=40))
    def prop(pres, body):
        check("".join(pres) + body)
    prop()


@pytest.mark.parametrize("odd", ["W1105 12:00:02.000000 1 launcher.py:9] unprefixed warning from the launcher",
                                 "[I1105 12:00:02.000000 1 ProcessGroupNCCL.cpp:1] [Rank 5] a rank tag only",
                                 "[NeMo I 2024-11-05 12:00:02 train:3 rank:6] a NeMo line",
                                 "[7]:an elastic-template line",
                                 "worker-1: [default3]:a pdsh-wrapped role line"])
def test_tail_walk_does_not_stop_before_lines_of_other_rank_sources(tmp_path, odd):
    """The early stop of a multi-rank tail walk holds only where every tail line opens with `[rankN]:`: a line whose
    rank comes from elsewhere (or from nowhere) keeps its place among the last lines, as a full walk gives it."""
    lines = ["[default0]:[rank0]:[I1105 12:00:00.000000 1 t.py:1] a", "[default1]:[rank1]:[I1105 12:00:01.000000 1 t.py:1] b",
             odd]
    lines += [f"[default{i % 2}]:[rank{i % 2}]:[I1105 12:01:{i % 60:02d}.000000 1 t.py:2] step {i}" for i in range(50)]
    (tmp_path / "node0.out").write_text("\n".join(lines) + "\n")
    (f,) = _scan(tmp_path).files
    got = {k: v.line for k, v in f.last_lines.items()} | {("local", k): v.line for k, v in f.last_local.items()}
    assert 3 in got.values(), got  # the odd line (line 3) is some key's last line, whichever key attribution gives
    assert got[0] == 52 and got[1] == 53


def test_implausible_claims_in_kept_hits_are_noted(tmp_path):
    """A claim past the bounds is noted wherever its facts are kept: in a first hit, and in a repeat that is still
    among the newest few at the end (a repeat pushed out of the ring is only counted: its facts are used nowhere)."""
    lines = ["world_size=8"] * 5 + ["NCCL communicator was aborted on rank 99999999.", "world_size=99999999"]
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n")
    (f,) = _scan(tmp_path).files
    claims = sorted(n.split(":")[0] for n in f.notes if "implausible claim" in n)
    assert claims == ["line 6", "line 7"], f.notes


def test_hits_and_stamps_cross_to_the_parent_whole():
    """Workers pickle each kept Hit and its Stamp as constructor arguments (their __reduce__, for speed): every
    field, provenance included, must come back, and a field added to either class must be added there too."""
    import dataclasses
    import pickle

    from trainlog_debugger.tools.lines.timestamps import Stamp, parse_stamp
    from trainlog_debugger.tools.scan.result import Hit

    st = parse_stamp("2024-11-05T12:34:41.123456+02:00 [rank3]: x").with_meta(aligned=True, offset_s=-1.5)
    hit = Hit("pytorch.watchdog_timeout", 12, 3400, "[rank3]: Watchdog caught collective operation timeout", 3, 1,
              "node07", st, {"seq": 5231, "op": "ALLREDUCE"})
    back = pickle.loads(pickle.dumps([hit, hit.time, Hit("x.y", 1, 0, "t")]))
    assert back == [hit, st, Hit("x.y", 1, 0, "t")]
    assert back[0].time.extra == (("aligned", True), ("offset_s", -1.5)) and type(back[0].time) is Stamp
    for cls, obj in ((Stamp, st), (Hit, hit)):  # every field, but those marked as the parent's own (Hit.key)
        assert len(obj.__reduce__()[1]) == len([f for f in dataclasses.fields(cls) if f.metadata.get("pickled", True)])


def test_a_scan_leaves_no_remembered_lines_behind(tmp_path):
    """The memo of lines' times and ranks is emptied when a scan ends (a long-lived process, the Slack bot, keeps no
    log lines of a bundle it is done with)."""
    from trainlog_debugger.tools.bundle.open import open_bundle
    from trainlog_debugger.tools.scan import nearby
    from trainlog_debugger.tools.scan.driver import scan_bundle

    log = tmp_path / "rank_0.log"
    log.write_text("[rank0]:[E1105 03:13:52.000134623 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
                   "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 1800087 milliseconds before timing out.\n"
                   "terminate called after throwing an instance of 'c10::DistBackendError'\n")
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b, workers=1)
    assert res.patterns and nearby._stamps.cache_info().currsize == nearby._ranks.cache_info().currsize == 0


_LABEL_PIECES = [b"[rank%d]" % r for r in (0, 1, 7, 42, 9999, 10000, 123456)] + \
    [b"[rank00]", b"[rank007]", b"[rank12345678]", b"[rank]", b"[rank3", b"[Rank 3]", b"x", b"\n", b"[rank-1]"]


@pytest.mark.parametrize("engine", ["hyperscan", "none"])
def test_rank_labels_with_a_known_rank_find_exactly_the_labels(engine, monkeypatch):
    """rank_labels answers from two counts when the known ranks' labels account for every `[rank` of the buffer,
    else from the engine: either way exactly the plausible `[rankN]` labels present, whatever `known` holds (its
    own rank absent, other ranks present, zero-padded or 8-digit labels that are no label of it)."""
    from hypothesis import given, settings, strategies as st

    from trainlog_debugger.tools.scan import labels
    if engine == "none":
        monkeypatch.setattr(labels, "_hs", None)
    elif labels._hs is None:
        pytest.skip("hyperscan is not installed")

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(_LABEL_PIECES), max_size=30),
           st.sets(st.sampled_from([0, 1, 7, 42, 9999, 10000, 123456, 5]), max_size=3))
    def check(pieces, known):
        buf = b" ".join(pieces)
        assert labels.rank_labels(buf, set(known)) == labels._ints(labels._RANK_LABEL.findall(buf)), (buf, known)

    check()


class _Failing(_Trickle):
    """A raw stream whose first read gives 1,000 bytes (lines included) and whose next read fails, as a truncated
    gzip does part-way through its first 64 KiB."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.reads = 0

    def readinto(self, b) -> int:
        self.reads += 1
        if self.reads > 1:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        return super().readinto(b)


def test_a_read_error_in_the_first_64_kib_stops_the_file_before_its_scan(straggler16):
    """The CR probe reads the first 64 KiB whole (a peek may hold less), so a read error in them stops the file
    before its scan, as before peeking: the driver then records the file as unreadable, not as a partial scan."""
    import io
    from trainlog_debugger.tools.scan.engine import make_engine
    from trainlog_debugger.tools.sources import patterns
    data = b"[rank3]:[E1105 12:00:00.000000000 x.cpp:1] line\n" * 3000
    eng = make_engine(list(patterns()))
    with pytest.raises(EOFError):
        filescan.FileScanner(eng).scan("rank_3.log", "text", len(data), io.BufferedReader(_Failing(data), 1 << 16))


class _Counting(bytes):
    """A buffer that counts the passes made over it with `count`."""

    counts = 0

    def count(self, *a):
        type(self).counts += 1
        return super().count(*a)


def test_rank_labels_count_only_a_few_known_ranks():
    """Counting labels rank by rank is one pass over the buffer each: a multi-rank file's many known ranks (every
    rank found in its earlier chunks) go to the engine's one pass instead."""
    from trainlog_debugger.tools.scan import labels
    if labels._hs is None:
        pytest.skip("without Hyperscan the fallback counts each label by design")
    buf = _Counting(b"".join(b"[rank%d]: step\n" % (r % 300) for r in range(3000)))
    _Counting.counts = 0
    assert labels.rank_labels(buf, set(range(300))) == set(range(300))
    assert _Counting.counts <= 2 + labels.COUNTED
    _Counting.counts = 0
    assert labels.rank_labels(_Counting(b"[rank7]: a\n[rank7]: b\n"), {7}) == {7}
    assert 0 < _Counting.counts <= 2 + labels.COUNTED


def test_line_starts_of_many_hits_on_long_lines_are_exact_in_both_engines():
    """Issue 30: the Hyperscan engine now searches only between one hit and the next for the line start (searching
    back to the buffer's start for every hit was quadratic on one long line); the starts are the same as a
    split's, whatever the mix of long lines, short lines and hits per line."""
    from trainlog_debugger.tools.scan.engine import available_engines, make_engine
    from trainlog_debugger.tools.sources.pattern import P
    pats = [P("t.hit", 1, "network", "root_candidate", r"completion with error", "completion with error",
              "Got completion with error 12", "x")]
    hit = b"NET/IB : Got completion with error 12, vendor err 129 "
    lines = [b"start", hit * 5000, b"quiet", hit, b"", hit * 3 + b"tail", b"end"]
    buf = b"\n".join(lines) + b"\n"
    want, pos = set(), 0
    for ln in lines:
        if b"completion with error" in ln:
            want.add((pos, 0))
        pos += len(ln) + 1
    for name in available_engines():
        assert make_engine(pats, name).candidates(buf) == want, name


def test_a_per_node_tail_with_unlabelled_abort_lines_may_still_stop_early(tmp_path):
    """torchrun's `[default3]:` prefixes the C++ abort text that c10 did not label (`terminate called ...`,
    `frame #0: ...`): those lines fall to the rank the file maps local rank 3 to, so the reverse walk may still stop
    once every rank has its last line (it walked all 2,500 lines of each per-node file: two thirds of a 10,000-rank
    scan), and every last line is the one the full walk finds."""
    from trainlog_debugger.tools.scan.tail import tail_ranks
    lines = []
    for i in range(400):
        r = i % 4
        lines.append(f"[default{r}]:[rank{40 + r}]:[I1105 12:{i // 60:02d}:{i % 60:02d}.000000 1 t.py:2] step {i}")
    for r in range(4):
        lines.append(f"[default{r}]:[rank{40 + r}]:[E1105 12:30:00.00000{r} 1 ProcessGroupNCCL.cpp:636] [Rank {40 + r}]"
                     " To avoid data inconsistency, we are taking the entire process down.")
        lines += [f"[default{r}]:terminate called after throwing an instance of 'c10::DistBackendError'",
                  f"[default{r}]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)"]
    (tmp_path / "node5.out").write_text("\n".join(lines) + "\n")
    (f,) = _scan(tmp_path).files
    for r in range(4):  # each rank's last line is its own frame line, mapped from its local rank
        assert f.last_lines[40 + r].line == 400 + 3 * r + 3 and "frame #0" in f.last_lines[40 + r].text
        assert f.last_lines[40 + r].time is not None and f.last_lines[40 + r].time.minute == 30
    tail = (tmp_path / "node5.out").read_bytes()
    assert tail_ranks(f, tail, False) == {40, 41, 42, 43}
    f.local_to_rank.pop(2)  # a local rank the file does not map: its lines are kept apart, so the walk reads all
    assert tail_ranks(f, tail, False) is None


def _init(host: str, pid: int, rank: int, nranks: int, dev: int) -> str:
    return (f"{host}:{pid}:{pid + 97} [{dev}] NCCL INFO ncclCommInitRank comm 0x55d0c0a3e000 rank {rank} nranks "
            f"{nranks} cudaDev {dev} nvmlDev {dev} busId 18000 commId 0x7d1e0c4b9a3f2e11 - Init COMPLETE")


def test_a_file_of_one_process_takes_the_rank_its_nccl_init_line_states(tmp_path):
    """srun -o out-%t.log: per-process files with no rank prefix. The one host:pid that printed NCCL's world
    communicator init is the file's rank (its largest communicator's rank, not a subgroup's)."""
    (tmp_path / "88340.5.out").write_text("\n".join([
        _init("gpu-node-01", 41005, 1, 4, 1),  # a tensor-parallel group of 4: not the global rank
        _init("gpu-node-01", 41005, 5, 16, 1),
        "Fatal Python error: Segmentation fault", ""]))
    (tmp_path / "console.log").write_text("\n".join([  # two processes in one file: never one rank
        _init("gpu-node-00", 40000, 0, 16, 0), _init("gpu-node-00", 40001, 1, 16, 1),
        "Fatal Python error: Segmentation fault", ""]))
    with open_bundle(tmp_path) as b:
        res = scan_bundle(b)
    by_file = {f.rel: f for f in res.files}
    assert {h.rank for h in by_file["88340.5.out"].hits} == {5} and 5 in by_file["88340.5.out"].ranks
    assert all(h.rank is None for h in by_file["console.log"].hits if "Segmentation" in h.text)

"""The terminal exception's meaning decides the category (issue 10, mechanism 2; ../shared/TAXONOMY.md): the errno an
OSError carries, PyTorch's DataLoader-worker wrapper. Small realistic variants, not cases: one rank's log, a
traceback as Python prints it, with and without a rank prefix, with a handled warning before it."""

from __future__ import annotations

import pytest

from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.model import Status
from trainlog_debugger.tools.pipeline import investigate
from trainlog_debugger.tools.rules.software import classify_terminal


def _traceback(prefix: str, frames: list[str], last: str) -> list[str]:
    return [f"{prefix}Traceback (most recent call last):"] + [f"{prefix}  {x}" for x in frames] + [f"{prefix}{last}"]


SAVE = ['File "/workspace/train.py", line 412, in <module>', "    trainer.save_checkpoint(step)",
        'File "/usr/lib/python3/dist-packages/torch/serialization.py", line 652, in save', "    f.write(data)"]
LOADER = ['File "/workspace/train.py", line 200, in <module>', "    for batch in loader:",
          'File "/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 631, in __next__',
          "    data = self._next_data()"]

VARIANTS = [
    ("ENOSPC while saving a checkpoint", SAVE, "OSError: [Errno 28] No space left on device", "storage_io"),
    ("EDQUOT, worded without the number", SAVE, "OSError: Disk quota exceeded", "storage_io"),
    ("an exception raised in a DataLoader worker", LOADER,
     "ValueError: Caught ValueError in DataLoader worker process 3.", "data"),
    ("the rendezvous port taken", ['File "/opt/torch/distributed/rendezvous.py", line 189, in _create_c10d_store'],
     "OSError: [Errno 98] Address already in use", "config"),
    ("host memory", ['File "/workspace/data.py", line 77, in load'], "MemoryError", "oom"),
]


@pytest.mark.parametrize("prefix", ["", "[rank3]: "], ids=["bare", "rank-prefixed"])
@pytest.mark.parametrize("name,frames,last,category", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_the_terminal_error_names_the_category(tmp_path, prefix, name, frames, last, category):
    lines = [f"{prefix}UserWarning: the default of num_workers changed; retrying 1/5 succeeded"]  # handled, noise
    lines += _traceback(prefix, frames, last)
    (tmp_path / "rank_3.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == category and d.status != Status.completed, (name, d.headline)
    assert d.chain[0].evidence[0].text.endswith(last) and d.verified


def test_an_exception_with_no_resource_behind_it_stays_weak_software(tmp_path):
    (tmp_path / "rank_0.log").write_text("\n".join(_traceback("", ['File "/workspace/model.py", line 9, in forward'],
                                                             "KeyError: 'decoder.layers.11.mlp'")) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "software" and d.status == Status.inconclusive


@pytest.mark.parametrize("text,expected", [
    ("OSError: [Errno 5] Input/output error: '/lustre/ckpt/step_900/model.pt'", "storage_io"),
    ("OSError: [Errno 116] Stale file handle", "storage_io"),
    ("OSError: [Errno 24] Too many open files", "config"),
    ("RuntimeError: DataLoader worker (pid 4121) is killed by signal: Bus error.", None),  # shm: the infra rule's
    ("ValueError: too many values to unpack (expected 2)", "software"),
    ("OSError: [Errno 111] Connection refused", None),  # refused: config, network or a dead peer; not decided here
    # one sample's own file gone from disk: the data; a missing shard, config or output path is not decided here
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/imagenet/train/n01440764/n01440764_10026.JPEG'",
     "data"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/train/shard-00000.jsonl'", None),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/run1/config.json'", None),
    # an output the job writes (a plot, a sample it renders) is no sample of the dataset: a missing output path
    ("FileNotFoundError: [Errno 2] No such file or directory: 'outputs/run1/loss_curve.png'", None),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'outputs/step_1000.png'", None),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/stats/mean.npy'", None),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/mnt/ds/audio/spk1/utt_07.wav'", "data"),
    # a library the install lacks on this node: the install; the driver's own libcuda is the tables' (node/container)
    ("ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory", "config"),
    ("ImportError: libcuda.so.1: cannot open shared object file: No such file or directory", None),
    # a worker reading from an object store whose client gave up: the store's, not the sample's
    ("fsspec.exceptions.FSTimeoutError: Caught FSTimeoutError in DataLoader worker process 1.", "storage_io"),
    ("botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: \"None\"", "storage_io"),
    ("KeyError: Caught KeyError in DataLoader worker process 0.", "data"),
    ("google.api_core.exceptions.ServiceUnavailable: 503 GET https://storage.googleapis.com/b/o", "storage_io"),
    ("botocore.exceptions.NoCredentialsError: Unable to locate credentials", "config"),  # a setting
    ("botocore.exceptions.ClientError: An error occurred (NoSuchKey) when calling the GetObject operation", None),
    ("botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the GetObject operation (reached max "
     "retries: 4): Please reduce your request rate.", "storage_io"),
    # a wrapper re-raising the ClientError's text (mosaicml streaming's shard download, dataset.py)
    ("RuntimeError: An error occurred (503) when calling the HeadObject operation (reached max retries: 4): Service "
     "Unavailable. Check if the shard file exists in your remote location or have you deleted the shard file from the "
     "local directory?", "storage_io"),
])
def test_classifier_table(text, expected):
    got = classify_terminal(text)
    assert (got[0] if got else None) == expected


def _chained(tmp_path, inner: list[str], outer: list[str]):
    """Rank 0's log with `inner` as the cause of `outer`, as Python prints a chain (the cause first)."""
    lines = inner + ["[rank0]: ", "[rank0]: The above exception was the direct cause of the following exception:",
                     "[rank0]: "] + outer
    (tmp_path / "rank_0.log").write_text("\n".join(lines) + "\n")
    with open_bundle(tmp_path) as b:
        return investigate(b)


def test_a_chained_exception_is_classified_by_its_innermost_cause(tmp_path):
    """Python prints the cause first (`The above exception was the direct cause of the following exception:`): the
    outer RuntimeError says nothing about the fault, the inner OSError's errno does."""
    inner = _traceback("[rank0]: ", SAVE, "OSError: [Errno 122] Disk quota exceeded")
    outer = _traceback("[rank0]: ", ['File "/workspace/train.py", line 412, in <module>'],
                       "RuntimeError: checkpoint save failed at step 900")
    d = _chained(tmp_path, inner, outer)
    assert d.category == "storage_io" and d.culprit_ranks == [0], d.headline
    assert "Disk quota exceeded" in d.chain[0].evidence[0].text


def test_a_cause_whose_class_names_no_error_is_still_the_innermost(tmp_path):
    """pyarrow's `ArrowInvalid` (no `Error` in its name) ends the first traceback: Python prints any exception at a
    traceback's end as `module.Class: message`, so it is the cause the outer DatasetGenerationError wraps."""
    inner = _traceback("[rank0]: ", ['File "/usr/local/lib/python3.10/dist-packages/datasets/packaged_modules/json/'
                                     'json.py", line 137, in _generate_tables', "    pa_table = paj.read_json(",
                                     'File "pyarrow/_json.pyx", line 308, in pyarrow._json.read_json'],
                       "pyarrow.lib.ArrowInvalid: JSON parse error: Missing a closing quotation mark in string. in row 4107")
    outer = _traceback("[rank0]: ", ['File "/app/sft.py", line 96, in <module>',
                                     '    ds = load_dataset("json", data_files=cfg.data_files, split="train")'],
                       "datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset")
    d = _chained(tmp_path, inner, outer)
    assert d.category == "data" and "ArrowInvalid" in d.chain[0].evidence[0].text, d.headline


# Where it was raised decides as much as what was raised (tools/rules/terminal.py, signal 2): the same ValueError is
# the data's fault inside Dataset.__getitem__ and the code's in a forward pass.
GETITEM = ['File "/workspace/train.py", line 88, in <module>', "    for step, batch in enumerate(loader):",
           'File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch.py", line 52, in fetch',
           "    data = [self.dataset[idx] for idx in possibly_batched_index]",
           'File "/workspace/data/shards.py", line 141, in __getitem__', "    rec = json.loads(raw)"]
FORWARD = ['File "/workspace/train.py", line 88, in <module>', "    loss = model(batch)",
           'File "/workspace/model.py", line 61, in forward', "    h = self.proj(x)"]
# HF datasets' JSON builder parsing a data file (pandas tried after pyarrow's own error)
READER = ['File "/home/rl/dpo/train_dpo.py", line 96, in main', '    ds = load_dataset("json", data_files=files)',
          'File "/opt/conda/lib/python3.10/site-packages/datasets/packaged_modules/json/json.py", line 153, in '
          '_generate_tables', '    df = pd.read_json(f, dtype_backend="pyarrow")',
          'File "/opt/conda/lib/python3.10/site-packages/pandas/io/json/_json.py", line 1403, in _parse',
          "    ujson_loads(json, precise_float=self.precise_float), dtype=None"]
# huggingface_hub taking its download lock on a Lustre mount without flock (py-filelock's UnixFileLock)
FLOCK = ['File "/opt/env/lib/python3.11/site-packages/huggingface_hub/utils/_fixes.py", line 84, in WeakFileLock',
         "    lock.acquire(timeout=log_interval)",
         'File "/opt/env/lib/python3.11/site-packages/filelock/_api.py", line 255, in acquire', "    self._acquire()",
         'File "/opt/env/lib/python3.11/site-packages/filelock/_unix.py", line 45, in _acquire',
         "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)"]
CHECK = ['File "/workspace/train.py", line 140, in <module>', "    trainer.step(loss)",
         'File "/workspace/trainer/guards.py", line 17, in check_finite', '    raise ValueError(f"bad value at step {s}")']


@pytest.mark.parametrize("frames,last,category", [
    (GETITEM, "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 1 column 8121 (char 8120)", "data"),
    (GETITEM, "ValueError: invalid literal for int() with base 10: ''", "data"),
    (FORWARD, "ValueError: invalid literal for int() with base 10: ''", "software"),
    (CHECK, "ValueError: bad value at step 4410", "numerical"),
    (READER, "ValueError: Trailing data", "data"),
    (FLOCK, "OSError: [Errno 38] Function not implemented", "storage_io"),
    (GETITEM, "OSError: [Errno 5] Input/output error", "storage_io"),  # the errno outranks where it was raised
    # torch without a usable NumPy (a 1.x/2.x mismatch): the environment's, in a sample's code or not
    (GETITEM, "RuntimeError: Numpy is not available", "config"),
], ids=["decode-in-getitem", "value-in-getitem", "same-error-in-forward", "finiteness-check", "dataset-file-reader", "flock-unsupported",
        "errno-first",
        "numpy-missing-in-getitem"])
def test_where_it_was_raised(tmp_path, frames, last, category):
    (tmp_path / "rank_5.log").write_text("\n".join(_traceback("[rank5]: ", frames, last)) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == category, d.headline
    assert d.culprit_ranks == [5] and d.verified


def test_a_dataloader_worker_error_is_followed_into_the_original_traceback(tmp_path):
    """PyTorch re-raises a worker's exception as `Caught X in DataLoader worker process N` and prints the worker's
    own traceback under `Original Traceback`: the innermost error there decides (here an EIO: storage, not data)."""
    outer = _traceback("", LOADER + ['File "/usr/lib/python3/dist-packages/torch/_utils.py", line 705, in reraise',
                                     "    raise exception"], "OSError: Caught OSError in DataLoader worker process 1.")
    inner = ["Original Traceback (most recent call last):",
             '  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 349, in _worker_loop',
             "    data = fetcher.fetch(index)",
             '  File "/workspace/data/shards.py", line 139, in __getitem__', "    raw = fh.read(n)",
             "OSError: [Errno 5] Input/output error"]
    (tmp_path / "rank_2.log").write_text("\n".join(outer + inner) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "storage_io", d.headline
    assert any(e.text == "OSError: [Errno 5] Input/output error" for e in d.chain[0].evidence)


@pytest.mark.parametrize("line,category", [
    # a partial paste: only the exception line, no traceback, no timestamp, no rank
    ("ValueError: Image features and image tokens do not match: tokens: 1152, features 1156", "data"),
    ("ValueError: vision-language model image token/feature mismatch before scatter: image_tokens=8936", "data"),
    ("PIL.UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x7f2c1c0d9e90>", "data"),
    ("OSError: image file is truncated (17 bytes not processed)", "data"),
    ("RuntimeError: Function 'MulBackward0' returned nan values in its 0th output.", "numerical"),
    ("OSError: [Errno 28] No space left on device: '/scratch/ckpt/iter_0004000/mp_rank_03/model_optim_rng.pt'",
     "storage_io"),
    # a checkpoint that does not fit the model the settings built: the settings (or the path chosen), not a bug
    ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM: size mismatch for lm_head.weight: copying a "
     "param with shape torch.Size([32001, 4096]) from checkpoint, the shape in current model is "
     "torch.Size([32000, 4096]).", "config"),
], ids=["hf-vlm-mismatch", "vlm-mismatch-other-wording", "pil-undecodable", "pil-truncated", "anomaly-mode", "enospc",
        "state-dict-size-mismatch"])
def test_a_bare_exception_line_is_classified_by_its_meaning(tmp_path, line, category):
    (tmp_path / "paste.log").write_text(line + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == category and d.status != Status.completed, d.headline


@pytest.mark.parametrize("text", [
    "KeyError: 'image_features'",  # a key name is not a mismatch, nor proof of a bug
    "IndexError: list index out of range",
    "ValueError: number of tokens in prompt exceeds max_length",
    "RuntimeError: NCCL communicator was aborted on rank 3.",
])
def test_the_table_leaves_ambiguous_errors_alone(text):
    assert classify_terminal(text) is None


@pytest.mark.parametrize("text,exception", [
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x28 and 32x64)", "RuntimeError"),
    ("RuntimeError: The size of tensor a (1024) must match the size of tensor b (1023) at non-singleton dimension 1",
     "RuntimeError"),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "RuntimeError"),
    ("ValueError: too many values to unpack (expected 2)", "ValueError"),
    ("TypeError: forward() got an unexpected keyword argument 'attention_mask'", "TypeError"),
    ("AttributeError: 'DistributedDataParallel' object has no attribute 'generate'", "AttributeError"),
    ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
     "indicates that your module has parameters that were not used in producing loss.", "RuntimeError"),
    ("NameError: name 'tokenizer' is not defined", "NameError"),
    ("ModuleNotFoundError: No module named 'flash_attn'", "ModuleNotFoundError"),
])
def test_program_errors_are_software(text, exception):
    assert classify_terminal(text, (), exception)[0] == "software"


def test_a_shape_error_in_a_forward_pass_is_a_decisive_software_crash(tmp_path):
    """lab-2node-b's wording: a clearly classified program error on the first failing rank is decisive."""
    (tmp_path / "rank_2.log").write_text("\n".join(_traceback("[rank2]: ", FORWARD, "RuntimeError: mat1 and mat2 shapes "
                                                             "cannot be multiplied (16x28 and 32x64)")) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.status, d.culprit_ranks) == ("software", Status.crashed, [2]), d.headline


def test_the_same_shape_error_inside_getitem_is_the_record(tmp_path):
    (tmp_path / "rank_2.log").write_text("\n".join(_traceback("[rank2]: ", GETITEM, "RuntimeError: shape '[3, 224, 224]' "
                                                             "is invalid for input of size 150000")) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == "data", d.headline


def _torchrun_report(rank: int, host: str, last: str) -> list[str]:
    """torchrun's console when the workers' own output is gone (--redirects to a lost dir): its failure report copies
    the worker's error.json (`@record`) under `  traceback : `, frames indented four, the exception line two."""
    return [
        "E0612 10:21:36.402000 32100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
        f"local_rank: {rank % 8} (pid: 32131) of binary: /opt/conda/bin/python",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-06-12_10:21:33",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {rank % 8})",
        "  exitcode  : 1 (pid: 32131)",
        f"  error_file: /tmp/torchelastic_abc/none_xyz/attempt_0/{rank % 8}/error.json",
        "  traceback : Traceback (most recent call last):",
        '    File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/multiprocessing/errors/'
        '__init__.py", line 346, in wrapper',
        "      return f(*args, **kwargs)",
        '    File "/workspace/train.py", line 412, in main',
        "      torch.save(state, path)",
        f"  {last}",
        "  ",
        "============================================================"]


@pytest.mark.parametrize("last,category", [
    ("OSError: [Errno 28] No space left on device", "storage_io"),
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x28 and 32x64)", "software"),
])
def test_torchrun_failure_report_alone_names_the_rank_and_host(tmp_path, last, category):
    (tmp_path / "torchrun.out").write_text("\n".join(_torchrun_report(13, "gpu-node-3", last)) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert (d.category, d.culprit_ranks, d.culprit_nodes) == (category, [13], ["gpu-node-3"]), d.headline
    assert d.chain[0].evidence[0].text.strip() == last


def test_a_waiting_rank_in_the_root_cause_entry_is_not_the_trigger(tmp_path):
    """torchrun's Root Cause is only the first rank to exit: a collective timeout copied there is cascade."""
    (tmp_path / "torchrun.out").write_text("\n".join(_torchrun_report(
        2, "gpu-node-1", "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:"
                         "78] Timed out waiting 20000ms for recv operation to complete")) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.status == Status.inconclusive and d.culprit_ranks != [2], d.headline


@pytest.mark.parametrize("head,category", [
    # the parent re-raises what the child raised: the child's own (cut) traceback is the story, not a kill
    (["torch.multiprocessing.spawn.ProcessRaisedException:", "",
      "-- Process 5 terminated with the following error:", "Traceback (most recent call last):",
      '  File "/opt/conda/lib/python3.10/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap',
      "    fn(i, *args)",
      '  File "/work/train.py", line 20, in training',
      "    item = next(iter(dl))"], "software"),
    # the child died from a signal and left no Python error: something outside killed it
    (["torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL"], "infrastructure"),
    # a native crash of the child: the code's (an extension, a library)
    (["torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGSEGV"], "software"),
])
def test_mp_spawn_says_how_its_child_ended(tmp_path, head, category):
    (tmp_path / "paste.log").write_text("\n".join(head) + "\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.category == category, d.headline


def test_mp_spawn_child_that_exited_itself_is_a_consequence(tmp_path):
    """`terminated with exit code 1`: the child exited on its own and its own output says why; the line is a
    cascade, never the answer's trigger."""
    (tmp_path / "paste.log").write_text("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated "
                                        "with exit code 1\n")
    with open_bundle(tmp_path) as b:
        d = investigate(b)
    assert d.status == Status.inconclusive and d.confidence == "low", d.headline

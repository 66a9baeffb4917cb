"""A Jupyter notebook is read as the console its outputs hold, line for line with the file (tools/bundle/notebook.py):
its code cells, which quote the messages we look for, are never read; a citation is the file's own line."""

from __future__ import annotations

import json

from trainlog_debugger.tools.bundle.notebook import NotebookLines
from trainlog_debugger.tools.bundle.open import open_bundle
from trainlog_debugger.tools.bundle.source import Source
from trainlog_debugger.tools.pipeline import investigate

OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; 13.91 GiB already "
       "allocated; 1.02 GiB free; 14.12 GiB reserved in total by PyTorch)")
# an IPython traceback as nbformat stores it: one string per frame, coloured with ANSI escapes
TRACEBACK = ["\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
             "\x1b[0;31mOutOfMemoryError\x1b[0m                          Traceback (most recent call last)",
             "Cell \x1b[0;32mIn[2], line 3\x1b[0m\n\x1b[1;32m      1\x1b[0m from accelerate import notebook_launcher\n",
             f"\x1b[0;31mOutOfMemoryError\x1b[0m: {OOM}"]


def notebook(outputs: list, source: list | None = None) -> dict:
    quoting = {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
               "source": ["import torch\n", 'raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, '
                          'unhandled cuda error")\n']}
    run = {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": outputs,
           "source": source or ["from accelerate import notebook_launcher\n", "notebook_launcher(train, 2)\n"]}
    return {"cells": [quoting, run], "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4,
            "nbformat_minor": 5}


def write(path, nb: dict, indent: int | None = 1) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


def test_a_notebook_s_error_output_is_the_answer_and_its_code_is_not_read(tmp_path):
    write(tmp_path / "run" / "train.ipynb", notebook([
        {"name": "stderr", "output_type": "stream", "text": ["Launching training on 2 GPUs.\n",
                                                            "  3%|▎         | 30/1000 [00:14<07:40,  2.11it/s]\n"]},
        {"ename": "OutOfMemoryError", "evalue": OOM, "output_type": "error", "traceback": TRACEBACK}]))
    raw = (tmp_path / "run" / "train.ipynb").read_text(encoding="utf-8").split("\n")
    with open_bundle(tmp_path / "run") as b:
        assert [s.rel for s in b.sources] == ["train.ipynb"] and b.sources[0].notebook
        d = investigate(b)
    assert d.category == "oom", d.headline
    cited = [e for f in d.chain for e in f.evidence]
    assert cited and all(e.file == "train.ipynb" for e in cited)
    for e in cited:  # the file's own line: an editor shows the same text there, JSON-escaped
        assert "CUDA out of memory" in raw[e.line - 1] and "\\u001b" in raw[e.line - 1]
        assert e.text.startswith("OutOfMemoryError: CUDA out of memory")  # read without its colours
    assert "NCCL error" not in json.dumps([e.text for e in cited])  # the code cell quotes it; nothing prints it


def test_the_stream_output_of_a_launcher_is_read_line_by_line(tmp_path):
    """A cell that ran torchrun (`!torchrun ...`) prints the ranks' lines to its stream output: they are the job's
    log, with their ranks."""
    lines = [f"[rank{r}]:[E1105 12:34:56.789012345 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
             f"operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
             f"for 600011 milliseconds before timing out.\n" for r in (1, 2, 3)]
    write(tmp_path / "nb" / "run.ipynb", notebook([{"name": "stdout", "output_type": "stream", "text": lines}],
                                                  ["!torchrun --nproc_per_node 4 train.py\n"]))
    with open_bundle(tmp_path / "nb") as b:
        with b.sources[0].open() as fh:
            text = fh.read().decode()
    raw = (tmp_path / "nb" / "run.ipynb").read_text().split("\n")
    got = text.split("\n")
    assert len(got) == len(raw)  # line for line
    shown = [(i, ln) for i, ln in enumerate(got) if ln]
    assert [ln for _i, ln in shown] == [ln.rstrip("\n") for ln in lines]
    assert all("Watchdog caught" in raw[i] for i, _ln in shown)


def test_what_is_not_a_notebook_stays_skipped_as_source(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.ipynb").write_text('print("RuntimeError: CUDA error: an illegal memory access")\n')
    (tmp_path / "b" / "rank0.log").write_text("[rank0]: RuntimeError: CUDA error: an illegal memory access was "
                                              "encountered\n")
    with open_bundle(tmp_path / "b") as b:
        assert [s.rel for s in b.sources] == ["rank0.log"]
        assert any(s.rel == "x.ipynb" and "program source" in s.reason for s in b.skipped)


def test_the_conversion_keeps_lines_and_bounds_a_long_one():
    """One line out per line in, whatever the reads' boundaries, and an embedded image (a base64 line longer than
    notebook.LINE_MAX) is dropped as it streams, never held whole."""
    from trainlog_debugger.tools.bundle import notebook as nbmod
    from trainlog_debugger.tools.bundle.source import _NotebookOutputs
    text = json.dumps(notebook([
        {"output_type": "display_data", "data": {"image/png": "A" * (nbmod.LINE_MAX + 10),
                                                 "text/plain": ["<Figure size 640x480 with 1 Axes>"]}},
        {"name": "stderr", "output_type": "stream", "text": ["Killed\n"]}]), indent=1).encode()

    class Pieces:  # a stream that hands out 1,000 bytes a read
        def __init__(self, data):
            self.data = data

        def read(self, n):
            out, self.data = self.data[:1000], self.data[1000:]
            return out

        def close(self):
            pass

    conv = _NotebookOutputs(Pieces(text))
    out = b""
    while chunk := conv.read(4096):
        out += chunk
    got = out.decode().split("\n")
    assert len(got) == len(text.split(b"\n"))
    assert [x for x in got if x] == ["<Figure size 640x480 with 1 Axes>", "Killed"]
    assert NotebookLines().line(b'  "text": [') == b""


def test_a_notebook_source_is_picklable_for_the_workers(tmp_path):
    import pickle
    src = Source("a.ipynb", tmp_path / "a.ipynb", "generic", 10, notebook=True)
    assert pickle.loads(pickle.dumps(src)).notebook


# -- JSON lines ------------------------------------------------------------------------------------------------------
EXC_INFO = ('Traceback (most recent call last):\n  File "/app/train.py", line 88, in <module>\n    main()\n'
            '  File "/app/train.py", line 80, in main\n    loss.backward()\n'
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
            "might be incorrect.\n")


def test_a_structured_log_s_traceback_field_is_read_as_the_lines_it_holds(tmp_path):
    """python-json-logger / structlog: one JSON object a line, the traceback one escaped string. On disk the
    exception's class follows `\\n` (no word boundary): read with its escapes decoded, the exception is what the
    traceback reader finds, on the file's own line."""
    recs = [{"timestamp": "2024-05-01T12:00:00.120Z", "level": "INFO", "message": "step 1200 loss 2.31"},
            {"timestamp": "2024-05-01T12:00:05.532Z", "level": "ERROR", "message": "training failed",
             "exc_info": EXC_INFO}]
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "app.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    from trainlog_debugger.tools.scan.driver import scan_bundle
    with open_bundle(tmp_path / "j") as b:
        assert b.sources[0].json_lines
        tb = [h for f in scan_bundle(b).files for h in f.hits if h.pattern == "python.traceback"]
        d = investigate(b)
    assert tb and tb[0].line == 2 and tb[0].fields["exception"] == "RuntimeError"
    assert tb[0].fields["exception_line"] == 2 and tb[0].fields["frames"][-1].endswith(":main")
    assert d.category == "gpu_cuda", d.headline
    assert d.verified


def test_a_container_runtime_s_json_log_keeps_its_lines_and_reads_decoded(tmp_path):
    """Docker's json-file driver: each line of the process's output is one record, read as the line the process
    printed (the envelope and the record's own line end go); quotes and colours are decoded; an escaped backslash
    before an `n` stays a backslash and an `n`."""
    recs = [{"log": '[rank3]: \x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate 20.00 MiB. '
                    'GPU 3 has a total capacity of 79.10 GiB of which 6.88 MiB is free.\n', "stream": "stderr",
             "time": "2024-05-01T12:00:05.2Z"},
            {"log": 'saving to "C:\\new\\ckpt"\n', "stream": "stdout", "time": "2024-05-01T12:00:05.3Z"}]
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "pod-0-json.log").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    with open_bundle(tmp_path / "k") as b:
        with b.sources[0].open() as fh:
            lines = fh.read().decode().split("\n")
        d = investigate(b)
    assert len(lines) == 3 and lines[0].startswith("[rank3]: torch.OutOfMemoryError: CUDA out of memory")
    assert lines[1] == 'saving to "C:\\new\\ckpt"'
    assert d.category == "oom" and d.culprit_ranks == [3]


def test_a_traceback_docker_split_into_records_reads_as_the_process_printed_it(tmp_path):
    """One record a line of the traceback: read without the envelope, the traceback reader finds its frames and its
    exception as in a plain log."""
    lines = ["Traceback (most recent call last):\n", '  File "/app/train.py", line 88, in <module>\n', "    main()\n",
             '  File "/app/data.py", line 41, in __getitem__\n', "    ids = rec['input_ids']\n",
             "KeyError: 'input_ids'\n"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c0ffee-json.log").write_text("".join(
        json.dumps({"log": x, "stream": "stderr", "time": "2024-05-01T12:00:05.1Z"}, separators=(",", ":")) + "\n"
        for x in lines))
    from trainlog_debugger.tools.scan.driver import scan_bundle
    with open_bundle(tmp_path / "d") as b:
        tb = [h for f in scan_bundle(b).files for h in f.hits if h.pattern == "python.traceback"]
        d = investigate(b)
    assert tb and tb[0].fields.get("exception") == "KeyError" and tb[0].fields.get("exception_line") == 6
    assert d.category == "data", d.headline  # raised in __getitem__


def test_a_dataset_in_json_lines_is_not_read_decoded(tmp_path):
    """A chat dataset whose sample quotes a traceback is data, not a log: its strings stay escaped (no failure line
    of the job is made of them)."""
    (tmp_path / "ds" / "data").mkdir(parents=True)
    sample = {"messages": [{"role": "user", "content": "Why do I get this?\nTraceback (most recent call last):\n  File "
                            "\"x.py\", line 1, in <module>\nModuleNotFoundError: No module named 'flash_attn'\n"}]}
    (tmp_path / "ds" / "data" / "chat.jsonl").write_text((json.dumps(sample) + "\n") * 3)
    with open_bundle(tmp_path / "ds") as b:
        assert not b.sources[0].json_lines


def test_a_plot_s_nested_lists_and_a_split_emoji_do_not_lose_the_error_output(tmp_path):
    heat = {"output_type": "display_data", "data": {"application/vnd.plotly.v1+json": {"z": [[1, 2], [3, 4]]},
                                                    "text/plain": ["Figure()"]}}
    err = {"ename": "OutOfMemoryError", "evalue": OOM, "output_type": "error", "traceback": TRACEBACK}
    emoji = {"name": "stdout", "output_type": "stream", "text": ["epoch 1 done \ud83d\n"]}
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "plots.ipynb").write_text(json.dumps(notebook([heat, emoji, err]), indent=1) + "\n")  # \ud83d
    with open_bundle(tmp_path / "nb") as b:
        d = investigate(b)
    assert d.category == "oom", d.headline


def test_only_json_lines_are_read_decoded():
    from trainlog_debugger.tools.bundle.notebook import looks_like_json_lines
    assert looks_like_json_lines(b'{"level": "info", "msg": "start"}\n{"level": "error", "msg": "x\\ny"}\n')
    assert not looks_like_json_lines(b'{"a": 1}\n{"b": "x\\ny"}\n')  # no log record's key: a dataset's records
    assert not looks_like_json_lines(b'[rank0]: {"a": 1}\n{"b": 2}\n')  # a log line that prints a dict
    assert not looks_like_json_lines(b'{"a": 1}\nplain text\nmore text\n')
    assert not looks_like_json_lines(b'{\n "cells": []\n}\n')  # pretty-printed JSON is one document, not lines

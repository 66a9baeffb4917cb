"""What a terminal exception says was at fault: one classifier, one table (../shared/TAXONOMY.md, step 2).

Why a table and not a rule per error: a `RuntimeError`, an `OSError` or a `ValueError` can belong to any category;
what decides is what the exception *means*. Python and PyTorch give three readable signals, checked in this order,
first match wins:

1. the message: the errno an `OSError` carries (`[Errno 28]`, `No space left on device`), PyTorch's own wrappers
   (`Caught X in DataLoader worker process N`), wordings whose subject is a sample's content (an undecodable image,
   a multimodal sample whose placeholder tokens do not match its features), non-finite losses;
2. where it was raised: the innermost frames. Code that produces a sample (`Dataset.__getitem__`, a collate
   function, PyTorch's fetch/collate helpers, image/audio/arrow decoders) makes it the data's fault; a finiteness
   check makes it numerical;
3. a program error by its message (tensor shapes/devices/dtypes that do not fit, a call with the wrong arguments,
   a name that does not exist, autograd/DDP misuse): `software`, decisive, but only after step 2, because the same
   shape error raised inside `__getitem__` is the record's fault;
4. the type: `MemoryError` is host memory, `FloatingPointError` is numerics, `NameError`/`SyntaxError`/
   `ImportError` are the code or its environment.

No match means the classifier has nothing to say and the exception stays weak `software` (an exception with no
resource behind it is a program bug, TAXONOMY's `software`, but a bare `KeyError` or `IndexError` is as often a
config or a record, and only more evidence can prove which).
Extending it: add a row below and a variant to tests/test_terminal_errors.py.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Row(NamedTuple):
    rx: re.Pattern
    category: str
    why: str


def _r(rx: str, category: str, why: str) -> Row:
    return Row(re.compile(rx), category, why)


# 1. the message (the exception line, `Type: message`)
# the DataLoader's wrapper of a worker's exception (torch/_utils.py ExceptionWrapper.reraise): says where it was raised;
# the worker's own exception follows under `Original Traceback` (rules/software.py reads past it where that says more)
LOADER_WRAPPER = re.compile(r"\bCaught \w+ in DataLoader worker process \d+")


BY_MESSAGE = (
    # torch/cuda/__init__.py (_lazy_init): CUDA used in a process forked after the parent initialised it (a
    # DataLoader worker touching the GPU): the code's, whatever frame raised it (a sample's __getitem__ included)
    _r(r"Cannot re-initialize CUDA in forked subprocess", "software",
       "CUDA was used in a process forked after CUDA was initialised (a DataLoader worker touching the GPU): keep CUDA "
       "out of the workers, or use the 'spawn' start method"),
    # PyTorch's shared-memory segment (aten/src/ATen/MapAllocator.cpp: `unable to write to file </torch_<pid>_<n>>`,
    # a tensor passed between processes, a DataLoader worker's batch): /dev/shm is full, the container's, not a disk
    _r(r"unable to write to file </torch_\d+", "infrastructure",
       "shared memory (/dev/shm) is full: PyTorch could not grow a segment to pass a tensor between processes"),
    # torch/csrc/utils/tensor_numpy.cpp (`TORCH_CHECK(is_numpy_available(), "Numpy is not available")`): torch found
    # no usable NumPy when it started (its `Failed to initialize NumPy` warning: numpy missing, or an extension
    # built for another NumPy major version), so every tensor<->array conversion fails, a sample's included: the
    # environment's versions, chosen at install time (TAXONOMY config), not the record
    _r(r"\bNumpy is not available\b", "config",
       "torch could not load NumPy in this environment (a NumPy 1.x/2.x mismatch with a compiled module, or NumPy "
       "missing): every tensor-array conversion fails, whichever sample it is"),
    _r(r"\[Errno 28\]|No space left on device|\bENOSPC\b", "storage_io", "the filesystem is full (ENOSPC)"),
    _r(r"\[Errno 122\]|Disk quota exceeded|\bEDQUOT\b", "storage_io", "a disk quota was exceeded (EDQUOT)"),
    _r(r"\[Errno 30\]|Read-only file system|\bEROFS\b", "storage_io", "the filesystem is read-only (EROFS)"),
    _r(r"\[Errno 116\]|Stale file handle|\bESTALE\b", "storage_io", "a stale network-filesystem handle (ESTALE)"),
    _r(r"\[Errno 5\]|Input/output error|\bEIO\b", "storage_io", "the storage returned an I/O error (EIO)"),
    _r(r"\[Errno 98\]|Address already in use|\bEADDRINUSE\b", "config",
       "the address or port is already in use (EADDRINUSE)"),
    _r(r"\[Errno 24\]|Too many open files|\bEMFILE\b", "config", "the open-files limit was reached (EMFILE)"),
    # the loader found no such library on this node (glibc elf/dl-load.c): what was installed, or the library path
    # the job was launched with, is the fault (TAXONOMY: versions chosen at install time → config); not the
    # driver's own libcuda/libnvidia-ml, which the tables read as a node or container without the driver
    _r(r"(?<!libcuda\.so)(?<!libcuda\.so\.1)(?<!libnvidia-ml\.so)(?<!libnvidia-ml\.so\.1): cannot open shared "
       r"object file", "config", "a shared library the job needs is not installed on this node or not on its "
       "library path (a missing or mismatched install)"),
    _r(r"^\W*MemoryError\b|\[Errno 12\]|Cannot allocate memory|\bENOMEM\b", "oom", "host memory ran out"),
    # an object store's or remote filesystem's client gave up on the store (in a DataLoader worker too: the worker was
    # reading from it): fsspec's timeout, botocore's timeouts and broken connections, a ClientError the store answered
    # with a throttle or a 5xx, Google Cloud's and Azure's unavailable/timeout classes (TAXONOMY storage_io: object-store
    # errors), not the sample's. Missing credentials are a setting; a missing object (NoSuchKey) is not decided here
    _r(r"\b(?:fsspec\.exceptions\.FSTimeoutError|Caught FSTimeoutError|botocore\.exceptions\.(?:ReadTimeoutError|"
       r"ConnectTimeoutError|EndpointConnectionError|ConnectionClosedError|ResponseStreamingError|IncompleteReadError)|"
       r"google\.api_core\.exceptions\.(?:ServiceUnavailable|TooManyRequests|InternalServerError|DeadlineExceeded|"
       r"GatewayTimeout|RetryError)|azure\.core\.exceptions\.(?:ServiceRequestError|ServiceResponseError)|"
       # AIStore's Python SDK (python/aistore/sdk/obj/obj_file/errors.py): its object reader gave up re-opening the
       # stream, or could not open it
       r"(?:aistore\.sdk\.obj\.obj_file\.errors\.)?ObjectFileReader(?:MaxResume|Stream)Error)\b|"
       # botocore's ClientError text (exceptions.py: `An error occurred ({error_code}) when calling the {operation_name}
       # operation...`), with or without its class: a wrapper that re-raises str(e) (mosaicml streaming's shard
       # download: `RuntimeError: An error occurred (503) when calling the HeadObject operation ... Check if the shard
       # file exists`) still carries the store's answer
       r"An error occurred \((?:SlowDown|ServiceUnavailable|InternalError|RequestTimeout|Throttling\w*|5\d\d)\) "
       r"when calling the \w+ operation",
       "storage_io", "the object store's client gave up on it (a timeout, a broken connection, a throttled or failed "
       "request)"),
    _r(r"\bbotocore\.exceptions\.(?:NoCredentialsError|PartialCredentialsError|CredentialRetrievalError)\b", "config",
       "the object store's credentials are missing on this node (environment, instance role or config file)"),
    _r(LOADER_WRAPPER.pattern, "data",
       "raised inside a DataLoader worker (the dataset, a transform or collate)"),
    # the subject is a sample's content: PIL's undecodable/truncated images, Arrow rows that do not parse, a
    # multimodal sample whose placeholder tokens and features disagree (HF processors and VLM forward passes)
    _r(r"cannot identify image file|UnidentifiedImageError|image file is truncated|DecompressionBombError",
       "data", "a sample could not be decoded (corrupt or truncated image)"),
    _r(r"\bArrowInvalid\b", "data", "a data record does not parse (Arrow)"),
    # a single sample's own file (an image, a clip, a feature array) is gone: the dataset's index lists it, the disk
    # no longer holds it (TAXONOMY's "a missing data file"). A sample's file, by where it lies (a split's or a media
    # folder: train/, val/, images/, frames/, audio/) or by its numbered name (000000315242.jpg); never under an
    # output folder (outputs/, results/, checkpoints/, logs/, plots/, samples/: a missing output path is config). A
    # missing shard, config or output path stays the catalog's ENOENT (a wrong path is config)
    _r(r"(?i)\[Errno 2\] No such file or directory: ['\"](?!(?:[^'\"]*/)?(?:outputs?|results|runs|checkpoints?|ckpts?|"
       r"logs?|plots|figures|samples)/)(?:[^'\"]*/(?:train|val|valid|validation|test|images?|imgs|frames|clips|audio|wavs?|"
       r"videos?)[\w-]*/[^'\"]*|(?:[^'\"]*/)?[^'\"/]*\d{4}[^'\"/]*)\.(?:jpe?g|png|webp|bmp|gif|tiff?|wav|flac|mp3|ogg|"
       r"m4a|mp4|avi|mkv|webm|mov|npy|npz)['\"]", "data",
       "a sample's own file (image, audio, video, feature array) listed by the dataset is missing from disk"),
    _r(r"(?i)\b(?:image|video|audio)[ _-]?(?:token|feature|placeholder)s?\b[ \w/,-]{0,40}?"
       r"(?:mismatch|do not match|don't match|does not match)", "data",
       "a multimodal sample's placeholder tokens do not match its features (the sample's text contains a media "
       "token it has no media for, or truncation cut one)"),
    _r(r"(?i)\b(?:mismatch|do not match)\b[ \w/,:-]{0,40}?\b(?:image|video|audio)[ _-]?(?:token|feature)s?\b", "data",
       "a multimodal sample's placeholder tokens do not match its features"),
    _r(r"returned nan values in its \d+(?:st|nd|rd|th) output", "numerical",
       "autograd's anomaly detection found a NaN (detect_anomaly)"),
    _r(r"(?i)\b(?:loss|grad(?:ient)?s?|grad[_ ]norm)\b[^.;]{0,60}?\b(?:nan|inf|infinite|non-finite|not finite)\b|"
       r"\b(?:nan|infinite|non-finite)\b[^.;]{0,40}?\b(?:loss|grad(?:ient)?s?)\b", "numerical",
       "the loss or gradients became non-finite"),
)

# 2. where it was raised: any of the innermost frames (`path:function`)
SAMPLE_FUNCTIONS = frozenset({"__getitem__", "__getitems__", "collate_fn", "default_collate", "collate",
                              "_process_sample", "decode_sample", "load_sample"})
SAMPLE_PATHS = ("torch/utils/data/_utils/fetch.py", "torch/utils/data/_utils/collate.py", "/PIL/", "/webdataset/",
                "/torchvision/io/", "/torchaudio/", "/soundfile.py", "/decord/", "/datasets/arrow_dataset.py",
                "/datasets/formatting/", "/lhotse/")
BY_FRAME = (
    (lambda path, fn: fn in SAMPLE_FUNCTIONS or any(s in path for s in SAMPLE_PATHS), "data",
     "raised while producing a sample (dataset, decoder or collate)"),
    # py-filelock's flock call itself (src/filelock/_unix.py UnixFileLock._acquire: `fcntl.flock(fd, LOCK_EX |
    # LOCK_NB)`, and its `FileSystem does not appear to support flock` raised there on ENOSYS): what fails in it is the
    # mount's locking (ENOSYS on NFS without lockd or a FUSE mount, ENOLCK); a lock held by another process is not
    # raised there (it retries in _api.acquire until its Timeout)
    (lambda path, fn: path.endswith("/filelock/_unix.py") and fn == "_acquire", "storage_io",
     "raised by the filesystem's file locking (flock): the mount does not support it, or its lock service is down"),
    # the datasets library's file-format builders (packaged_modules/json, csv, parquet, text, ...: _generate_tables)
    # parse the data files themselves: what they raise is the file's content (a record that does not parse), whichever
    # parser raised it (pandas' `Trailing data` tried after pyarrow's own error)
    (lambda path, fn: "/datasets/packaged_modules/" in path, "data",
     "raised while reading a dataset file (the datasets library's format reader: a record that does not parse)"),
    (lambda path, fn: re.search(r"(?i)check_?finite|check_?nan|nan_?check|check_?numerics|assert_?finite|isfinite",
                                fn) is not None, "numerical", "raised by a finiteness check"),
)

# 3. a program error by its message, once the frames said it was not raised while producing a sample (a shape that
# does not fit inside Dataset.__getitem__ is the record's fault, TAXONOMY `data`; in a forward pass, the code's).
# Only wordings that name a contract the code broke: tensor shapes/devices/dtypes that disagree, a call with the
# wrong arguments, a name or attribute that does not exist, autograd misuse, DDP's unused-parameter error. A bare
# KeyError or IndexError is not here: a missing key is as often a config or a record as a bug.
PROGRAM_ERRORS = (
    # a checkpoint that does not fit the model it is loaded into (torch/nn/modules/module.py load_state_dict): the
    # model the settings built, or the checkpoint path chosen, is not the one that saved it; TAXONOMY's setting, not
    # a bug (the pytorch table reads these lines the same way)
    _r(r"size mismatch for [\w.]+: copying a param|Error\(s\) in loading state_dict|Missing key\(s\) in state_dict|"
       r"Unexpected key\(s\) in state_dict", "config",
       "a checkpoint that does not fit the model the settings built (another size, layout or architecture)"),
    _r(r"mat1 and mat2 shapes cannot be multiplied|The size of tensor a \(\d+\) must match the size of tensor b|"
       r"shape '\[[\d, -]*\]' is invalid for input of size|Given groups=\d+, weight of size|Dimension out of range|"
       r"Expected all tensors to be on the same device|expected scalar type \w+ but found \w+|"
       r"Input type \(\S+\) and weight type \(\S+\) should be the same|too many values to unpack|"
       r"not enough values to unpack", "software", "tensor shapes, devices or dtypes the code combined do not fit"),
    _r(r"takes \d+ positional arguments? but \d+ (?:were|was) given|got an unexpected keyword argument|"
       r"missing \d+ required positional argument|object is not (?:callable|subscriptable|iterable)|"
       r"object has no attribute|has no attribute '|name '\w+' is not defined|cannot import name|"
       r"No module named ", "software", "the code calls something that does not exist or with the wrong arguments "
       "(a bug, or a library version it was not written for)"),
    _r(r"Trying to backward through the graph a second time|modified by an inplace operation|"
       r"element \d+ of tensors does not require grad|Expected to have finished reduction in the prior iteration|"
       r"parameters that were not used in producing (?:the )?loss", "software",
       "autograd or DDP used against its contract (backward twice, an in-place change, unused parameters)"),
)

# 4. the type
BY_TYPE = {
    "MemoryError": ("oom", "host memory ran out"),
    # torch.OutOfMemoryError (the CUDA caching allocator), ray.exceptions.OutOfMemoryError (Ray's memory monitor
    # killed the task for host memory): whichever memory, the class says it ran out
    "OutOfMemoryError": ("oom", "memory ran out (an allocator or a memory monitor raised OutOfMemoryError)"),
    "FloatingPointError": ("numerical", "a floating-point check failed (NaN/Inf)"),
    "NameError": ("software", "a name the code uses is not defined"),
    "SyntaxError": ("software", "the code does not parse"),
    "IndentationError": ("software", "the code does not parse"),
    "UnboundLocalError": ("software", "a variable is used before it is assigned"),
    "NotImplementedError": ("software", "the code reached a path that is not implemented"),
    "ModuleNotFoundError": ("software", "a module the code imports is not installed (an environment mismatch)"),
    "ImportError": ("software", "an import failed (a library version the code was not written for)"),
}


# A line that says its error was handled: retried, skipped, suppressed, ignored, logged at warning level by Python
# (`UserWarning`, glog `W1105`, `WARNING`). Such a line is noise however early it is (protocol step 4). NCCL's own
# `NCCL WARN` is its error level and is not read here.
HANDLED = re.compile(r"(?i)\b(?:retry(?:ing)?|will retry|retried|skipp(?:ing|ed)|suppress(?:ed|ing)|ignor(?:ed|ing)|"
                     r"recovered|falling back)\b|\b(?:User|Deprecation|Future|Runtime|Resource)Warning\b|"
                     r"^\W*(?:\[[^\]]*\]:?\s*)*W\d{4} \d|(?<!NCCL )\bWARN(?:ING)?\b")


def handled(text: str) -> bool:
    """Does the line itself say that the error it reports was handled (retried, skipped, only warned about)?"""
    return HANDLED.search(text) is not None


def classify(text: str, frames: list[str] | tuple[str, ...] = (), exception: str | None = None) -> tuple[str, str] | None:
    """(category, why) for a terminal exception line, its innermost frames and its type; None when nothing in them
    names what was at fault."""
    for row in BY_MESSAGE:
        if row.rx.search(text):
            return row.category, row.why
    for f in reversed(frames):  # innermost first
        path, _, fn = f.rpartition(":")
        for test, category, why in BY_FRAME:
            if test(path, fn):
                return category, f"{why}: {fn} in {path.rsplit('/', 1)[-1]}"
    for row in PROGRAM_ERRORS:
        if row.rx.search(text):
            return row.category, row.why
    return by_type(exception)


def by_type(exception: str | None) -> tuple[str, str] | None:
    """(category, why) from the exception's type alone: the last resort of `classify`, and the weakest (a type
    says little of what was at fault: a NotImplementedError may be a prompt too long for the settings)."""
    return BY_TYPE.get((exception or "").rsplit(".", 1)[-1])

"""tools/sources/deepspeed.py: the fp16 loss scaler (a handled overflow vs the scaler giving up) and the launcher."""

from __future__ import annotations

import pytest
from matching import check, params

LINES = [
    ("a handled overflow", "[2024-05-02 10:11:12,345] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
     "Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768", {"deepspeed.overflow_skip": {}}),
    ("the scaler gives up", "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     {"deepspeed.loss_scale_min": {}}),
    ("the launcher kills the rest", "[2024-05-02 10:11:12,345] [INFO] [launch.py:319:sigkill_handler] Killing "
     "subprocess 41223", {"deepspeed.launcher_kill": {}}),
    ("a rank ended by a signal (SIGBUS): its return code, negative",
     "[2024-05-02 10:11:12,345] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
     "'--local_rank=3'] exits with return code = -7", {"deepspeed.exit_code": {"returncode": -7}}),
    ("a rank that exited 1, no rank in its command", "[2024-05-02 10:11:12,345] [ERROR] [launch.py:325:sigkill_handler]"
     " ['python', 'main.py'] exits with return code = 1", {"deepspeed.exit_code": {"returncode": 1}}),
    ("the launcher itself signalled from outside", "[2025-01-27 10:32:12,062] [INFO] [launch.py:328:sigkill_handler] "
     "Main process received SIGTERM, exiting", {"deepspeed.launcher_signalled": {"signal": "SIGTERM"}}),
]

NEAR_MISSES = [
    ("a loss-scale report", "[2024-05-02 10:11:12,345] [INFO] [logging.py:96:log_dist] [Rank 0] step=200, skipped=3, "
     "lr=[0.0001], mom=[(0.9, 0.999)]", {}),
]


@pytest.mark.parametrize("line, expected", params(LINES))
def test_lines(line, expected):
    check(line, expected)


@pytest.mark.parametrize("line, expected", params(NEAR_MISSES))
def test_near_misses(line, expected):
    check(line, expected)

"""The hardware tests import their sample generator, `hw_samples.py`, from this folder (whatever the import mode)."""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

"""What the trainer (train.py) and the model's reader (model.py) share: the shipped table and model, the model's
schema, the command that retrains it and the hash that ties the two.  Its own module so that neither of the two
imports the other (a report reads the model without importing the trainer)."""

from __future__ import annotations

import os
from pathlib import Path

MODEL_SCHEMA = "iodiag.recommend-model/1"
DATA_DIR = Path(__file__).resolve().parent / "data"
SHIPPED_TABLE = DATA_DIR / "training.csv"
SHIPPED_MODEL = DATA_DIR / "model.json"
RETRAIN = ("iodiag recommend train --table src/iodiag/recommend/data/training.csv "
           "--out src/iodiag/recommend/data/model.json")


def sha256_of(path: str | os.PathLike) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()

"""Read what an offline W&B run wrote to its `run-<id>.wandb` file: the transaction log the W&B service
keeps (LevelDB's log format: 32 KiB blocks of records with a 7-byte header, after a 7-byte file header),
each record a `wandb_internal_pb2.Record`."""

from __future__ import annotations

import json
import pathlib

BLOCK, HEADER = 32768, 7
FULL, LAST = 1, 4


def records(path: pathlib.Path) -> list:
    from wandb.proto import wandb_internal_pb2

    data = pathlib.Path(path).read_bytes()
    assert data[:4] == b":W&B", "not a W&B transaction log"
    position, chunks, found = HEADER, [], []
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # the rest of a block too short for a header is padding
            position += left
            continue
        length, kind = int.from_bytes(data[position + 4:position + 6], "little"), data[position + 6]
        if kind == 0:
            break
        chunks.append(data[position + HEADER:position + HEADER + length])
        position += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(chunks))
            found.append(record)
            chunks = []
    return found


def _key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def config(path: pathlib.Path) -> dict:
    """The run's config, as the run record and later config updates set it."""
    values = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        items = record.run.config.update if kind == "run" else record.config.update if kind == "config" else []
        values.update({_key(item): json.loads(item.value_json) for item in items})
    return values


def history(path: pathlib.Path) -> list[dict]:
    """Every logged row, W&B's own keys (_step, _runtime, _timestamp) included."""
    return [{_key(item): json.loads(item.value_json) for item in record.history.item}
            for record in records(path) if record.WhichOneof("record_type") == "history"]

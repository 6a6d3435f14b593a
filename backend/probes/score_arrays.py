"""A finished probe's scores as numpy arrays, for selection previews on pools of millions.

A finished probe's scores change only when labels re-grade them, which bumps its scores revision,
so its arrays are cached per process (a few, least recent out), keyed by database, probe id,
creation time and scores revision: a key that cannot come back, even where a deleted probe's id was
reused (SQLite before migration 0004). Deleting a pool drops its probes' entries.
On Postgres they are read with a binary COPY parsed by numpy, which is several times faster than
fetching a million Python tuples.
"""

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

import numpy as np
from sqlalchemy import text
from sqlmodel import Session

_CACHE: "OrderedDict[tuple[str, int, str, int], ProbeScores]" = OrderedDict()
_CACHE_SIZE = 4
_LOCK = Lock()


@dataclass(frozen=True, eq=False)  # hashed by identity: selectors are cached per scores object
class ProbeScores:
    prompt_ids: np.ndarray  # int64, ascending (the pool's upload order)
    difficulty: np.ndarray  # float64
    pass_rate: np.ndarray  # float64, NaN in label-free mode
    base_wrong: np.ndarray  # bool
    correct_count: np.ndarray  # int64, -1 in label-free mode (the learnable-share forecast needs c and k)
    k: np.ndarray  # int64, samples per prompt

    def __len__(self) -> int:
        return len(self.prompt_ids)


# No ORDER BY: numpy sorts the ids faster than Postgres does (the order only has to be deterministic).
_QUERY = ("SELECT prompt_id, difficulty, coalesce(pass_rate, 'NaN'), base_wrong, coalesce(correct_count, -1), k "
          "FROM prompt_score WHERE probe_id = {probe_id}")

# COPY BINARY rows of (int8, float8, float8, bool, int4, int4): a field count, then (length, value) per field.
_ROW = np.dtype([("n", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("difficulty", ">f8"),
                 ("l3", ">i4"), ("pass_rate", ">f8"), ("l4", ">i4"), ("base_wrong", "?"),
                 ("l5", ">i4"), ("correct_count", ">i4"), ("l6", ">i4"), ("k", ">i4")])
_HEADER = 19  # signature (11) + flags (4) + extension length (4)


def _read_postgres(session: Session, probe_id: int) -> ProbeScores:
    cursor = session.connection().connection.driver_connection.cursor()
    buffer = bytearray()
    sql = _QUERY.format(probe_id=int(probe_id)).replace("'NaN'", "'NaN'::float8")
    with cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT BINARY)") as copy:
        for chunk in copy:
            buffer += chunk
    rows = np.frombuffer(memoryview(buffer)[_HEADER:len(buffer) - 2], dtype=_ROW)
    return _in_id_order(rows["id"], rows["difficulty"], rows["pass_rate"], rows["base_wrong"],
                        rows["correct_count"], rows["k"])


def _in_id_order(ids, difficulty, pass_rate, base_wrong, correct_count, k) -> ProbeScores:
    order = np.argsort(ids, kind="stable")
    return ProbeScores(np.asarray(ids, np.int64)[order], np.asarray(difficulty, np.float64)[order],
                       np.asarray(pass_rate, np.float64)[order], np.asarray(base_wrong, bool)[order],
                       np.asarray(correct_count, np.int64)[order], np.asarray(k, np.int64)[order])


def _read_generic(session: Session, probe_id: int) -> ProbeScores:
    rows = session.connection().execute(text(_QUERY.format(probe_id=int(probe_id)))).all()
    if not rows:
        return ProbeScores(np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0, bool),
                           np.empty(0, np.int64), np.empty(0, np.int64))
    return _in_id_order(*zip(*rows, strict=True))


def _key(session: Session, probe) -> tuple[str, int, str, int]:
    return str(session.get_bind().url), probe.id, str(probe.created_at), probe.scores_revision


def load_scores(session: Session, probe, *, finished: bool = True) -> ProbeScores:
    """Scores of a finished probe (the caller checks that it finished); ``finished=False``: the scores a
    running probe has so far, read afresh and not cached (each shard that finishes adds some)."""
    if not finished:
        return _read(session, probe.id)
    key = _key(session, probe)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    scores = _read(session, probe.id)
    with _LOCK:
        _CACHE[key] = scores
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return scores


def _read(session: Session, probe_id: int) -> ProbeScores:
    postgres = session.get_bind().dialect.name == "postgresql"
    return _read_postgres(session, probe_id) if postgres else _read_generic(session, probe_id)


def forget_probes(session: Session, probe_ids) -> None:
    """Drop the cached scores of these probes (their pool is being deleted)."""
    url, gone = str(session.get_bind().url), set(probe_ids)
    with _LOCK:
        for key in [key for key in _CACHE if key[0] == url and key[1] in gone]:
            del _CACHE[key]

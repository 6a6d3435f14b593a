"""Subset exports that TRL's GRPOTrainer reads as they are: a `prompt` column, the `answer` its
reward function receives, plus id and difficulty. Rows stream in rank order, a batch at a time."""

import csv
import io
import json
import tempfile
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from sqlmodel import Session, select

from backend.csv_cells import safe_cell
from backend.pools.tables import Prompt
from backend.probes.tables import PromptScore
from backend.subsets.tables import Subset, SubsetMember

FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv", "parquet": "application/vnd.apache.parquet"}
COLUMNS = ["prompt", "answer", "id", "difficulty", "pass_rate", "rank"]
_SCHEMA = pa.schema([("prompt", pa.string()), ("answer", pa.string()), ("id", pa.string()),
                     ("difficulty", pa.float64()), ("pass_rate", pa.float64()), ("rank", pa.int64())])


def export_rows(session: Session, subset: Subset, batch_size: int = 5000) -> Iterator[list[dict]]:
    query = (
        select(SubsetMember.rank, Prompt.text, Prompt.answer, Prompt.external_id, PromptScore.difficulty,
               PromptScore.pass_rate)
        .join(Prompt, Prompt.id == SubsetMember.prompt_id)
        .join(PromptScore, (PromptScore.prompt_id == SubsetMember.prompt_id)
              & (PromptScore.probe_id == subset.probe_id))
        .where(SubsetMember.subset_id == subset.id)
        .order_by(SubsetMember.rank)
        .execution_options(yield_per=batch_size)
    )
    for partition in session.exec(query).partitions():
        yield [{"prompt": text, "answer": answer, "id": ext_id, "difficulty": difficulty, "pass_rate": pass_rate,
                "rank": rank} for rank, text, answer, ext_id, difficulty, pass_rate in partition]


def jsonl_chunks(batches: Iterator[list[dict]]) -> Iterator[bytes]:
    for batch in batches:
        yield "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in batch).encode()


def csv_chunks(batches: Iterator[list[dict]]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    for batch in batches:
        writer.writerows({key: safe_cell(value) for key, value in row.items()} for row in batch)
        yield buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue().encode()


def write_parquet(batches: Iterator[list[dict]]) -> str:
    """Write to a temporary file (Parquet needs a footer, so it cannot stream) and return its path."""
    handle = tempfile.NamedTemporaryFile(prefix="budgetlab-subset-", suffix=".parquet", delete=False)
    handle.close()
    with pq.ParquetWriter(handle.name, _SCHEMA) as writer:
        for batch in batches:
            writer.write_table(pa.Table.from_pylist(batch, schema=_SCHEMA))
    if pq.ParquetFile(handle.name).metadata.num_rows == 0:  # an empty subset still has a schema
        pq.write_table(_SCHEMA.empty_table(), handle.name)
    return handle.name

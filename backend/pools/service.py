"""Pools: import a file (streamed, one transaction), the demo pool, listing, prompts with scores, deletion.

Services flush; the caller commits (the request session, or `session_scope` in the worker and CLI).
A rejected import raises `IngestError` and the caller rolls back, so nothing of it remains: the pool
row and its prompts are written in the caller's one transaction.

On Postgres prompts are written with ``COPY ... FROM STDIN`` (CSV, built by the C csv writer in
5,000-row chunks) straight into the prompt table: other writers are not held up by it.

SQLite has one write lock for the whole file, so an import writing the prompt table as it parses would
hold it for the whole upload and stall every worker's beat. There the rows are staged in a TEMP table
(SQLite's separate temporary database, private to the connection: writing it takes no lock on the main
file), and only the last statements write the main file: the pool row and one INSERT ... SELECT of the
staged rows (C speed, about 6 µs a row) in the same transaction. The caller must not have taken the
write lock earlier (`session_scope(immediate=False)`, `DeferredSessionDep`). A rejected or interrupted
import rolls back the TEMP table with the rest; a killed process leaves nothing behind either (SQLite
deletes its temporary files, and nothing reached the main file).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import IO, Any

from sqlalchemy import delete, insert
from sqlmodel import Session, select

from backend.curation.grading import TASK_TYPES, describe_answers, detect_task_type, parse_gold
from backend.database import get_or_404
from backend.errors import AppError, not_found
from backend.jobs.tables import Job, JobStatus
from backend.pools.demo import DEFAULT_COUNT as DEMO_COUNT
from backend.pools.demo import DEFAULT_SEED as DEMO_SEED
from backend.pools.demo import DEMO_POOL_NAME, HELD_OUT_POOL_NAME, demo_problems, held_out_problems
from backend.pools.ingest import (
    EXAMPLES_SHOWN,
    LABEL_FREE_HINT,
    FieldMapping,
    IngestError,
    PoolFileReader,
    Row,
    resolve_format,
)
from backend.pools.schemas import ImportReport, PromptOrder, PromptPage, PromptRead
from backend.pools.tables import Pool, Prompt
from backend.probes.score_arrays import forget_probes
from backend.probes.tables import Probe, PromptScore
from backend.settings import get_settings

DETECTION_ANSWERS = 1000
GOLD_CACHE_ENTRIES = 100_000
MAX_PAGE = 1000
_COLUMNS = ("pool_id", "position", "external_id", "text", "answer", "gold")
_MISSING: Any = object()
_ACTIVE_JOB_STATUSES = (JobStatus.queued.value, JobStatus.running.value, JobStatus.cancelling.value)


# --- writing prompts --------------------------------------------------------------------------------


class _PromptWriter:
    """Appends prompt rows ``(pool_id, position, external_id, text, answer, gold)`` in the session's
    transaction: COPY on Postgres, executemany elsewhere. Use as a context manager; `publish` after it."""

    def __init__(self, session: Session):
        self.session = session
        self.connection = session.connection()
        self.is_postgres = self.connection.dialect.name == "postgresql"
        self._copy_cm = None
        self._copy = None

    def __enter__(self) -> _PromptWriter:
        if self.is_postgres:
            driver_connection = self.connection.connection.driver_connection
            self._cursor = driver_connection.cursor()
            # Every text column is quoted (QUOTE_NONNUMERIC), so a None arrives as a quoted empty string;
            # FORCE_NULL turns it into NULL. answer and gold are never empty strings (the reader turns a
            # blank answer into None, parse_gold never returns ""), so nothing real becomes NULL.
            self._copy_cm = self._cursor.copy(
                f"COPY prompt ({', '.join(_COLUMNS)}) FROM STDIN WITH (FORMAT csv, FORCE_NULL (answer, gold))"
            )
            self._copy = self._copy_cm.__enter__()
            self._buffer = io.StringIO()
            self._csv = csv.writer(self._buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        return self

    def write(self, rows: list[tuple]) -> None:
        if not rows:
            return
        if self._copy is not None:
            self._csv.writerows(rows)
            self._copy.write(self._buffer.getvalue())
            self._buffer.seek(0)
            self._buffer.truncate()
        else:
            self.connection.execute(insert(Prompt.__table__), [dict(zip(_COLUMNS, row, strict=False)) for row in rows])

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._copy_cm is not None:
            try:
                self._copy_cm.__exit__(exc_type, exc, tb)
            finally:
                self._cursor.close()

    def publish(self, pool: Pool) -> None:
        """Store the pool's final fields (its prompts are in place already)."""
        self.session.add(pool)
        self.session.flush()


_STAGED = "temp.staged_prompt"


class _StagedPromptWriter:
    """SQLite: appends the same rows to a TEMP table (no lock on the database file); `publish` inserts the
    pool row and copies them into the prompt table, the import's only writes to the file. The pool id is
    not known while staging: the rows' pool_id (None) is replaced then."""

    def __init__(self, session: Session):
        self.session = session

    def __enter__(self) -> _StagedPromptWriter:
        connection = self.session.connection()
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {_STAGED}")  # left by an import on this connection
        connection.exec_driver_sql(f"CREATE TABLE {_STAGED} (pool_id INTEGER, position INTEGER, external_id TEXT, "
                                   f"text TEXT, answer TEXT, gold TEXT)")
        return self

    def write(self, rows: list[tuple]) -> None:
        if rows:
            self.session.connection().exec_driver_sql(f"INSERT INTO {_STAGED} VALUES (?, ?, ?, ?, ?, ?)", rows)

    def __exit__(self, exc_type, exc, tb) -> None:
        pass  # on error the caller rolls back, which drops the TEMP table with the rest

    def publish(self, pool: Pool) -> None:
        self.session.add(pool)
        self.session.flush()  # the first write to the database file: it waits here for the write lock
        connection = self.session.connection()
        connection.exec_driver_sql(f"INSERT INTO prompt ({', '.join(_COLUMNS)}) SELECT ?, {', '.join(_COLUMNS[1:])} "
                                   f"FROM {_STAGED} ORDER BY rowid", (pool.id,))
        connection.exec_driver_sql(f"DROP TABLE {_STAGED}")


# --- import -----------------------------------------------------------------------------------------


def check_task_type(task_type: str | None) -> str | None:
    """None (detect) or a known task type; 422 otherwise."""
    if task_type is None or task_type == "" or task_type == "auto":
        return None
    if task_type not in TASK_TYPES:
        raise IngestError(422, f"Unknown task type {task_type!r}; use one of {', '.join(TASK_TYPES)}, or auto to "
                               f"detect it from the answers.")
    return task_type


class _Grader:
    """parse_gold for every answer, with a bounded cache (pools repeat short answers: letters, numbers),
    counting the answers that cannot be graded and keeping a few of them."""

    def __init__(self, task_type: str, unit: str):
        self.task_type = task_type
        self.unit = unit
        self.cache: dict[str, str | None] = {}
        self.bad_count = 0
        self.bad_examples: list[tuple[int, str | None]] = []

    def prompt_rows(self, pool_id: int, batch: list[Row]) -> list[tuple]:
        """Database rows for a batch: (pool_id, position, external_id, text, answer, gold)."""
        cache = self.cache
        cache_get = cache.get
        task_type = self.task_type
        rows = []
        append = rows.append
        for position, external_id, text, answer, locator in batch:
            if answer is None:
                gold = None
            else:
                gold = cache_get(answer, _MISSING)
                if gold is _MISSING:
                    gold = parse_gold(answer, task_type)
                    if len(cache) < GOLD_CACHE_ENTRIES:
                        cache[answer] = gold
            if gold is None:
                self.bad_count += 1
                if len(self.bad_examples) < EXAMPLES_SHOWN:
                    self.bad_examples.append((locator, answer))
            append((pool_id, position, external_id, text, answer, gold))
        return rows

    def problem(self, total: int, answer_field: str) -> str | None:
        if not self.bad_count:
            return None
        shown = "; ".join(f"{self.unit} {loc}: {_clip(a)!r}" if a is not None else f"{self.unit} {loc}: no answer"
                          for loc, a in self.bad_examples)
        answers = [a for _, a in self.bad_examples if a is not None]
        fitting = [t for t in TASK_TYPES if t != self.task_type and answers
                   and all(parse_gold(a, t) is not None for a in answers)]
        if "math" in fitting and len(fitting) > 1 and detect_task_type(answers) != "math":
            fitting.remove("math")  # math accepts almost any text; suggest it only for LaTeX-looking answers
        advice = (f"They would be accepted as {' or '.join(fitting)} (send task_type=...), or " if fitting
                  else "Fix or fill those answers, or ")
        if self.task_type == "choice":  # the other answers are letters: grading them as text would be worse
            advice = "Write the letter of the right option there, e.g. (A), or remove those rows, or "
        return (f"{self.bad_count} of {total} answers in field {answer_field!r} cannot be graded as {self.task_type} "
                f"answers, for example {shown}. {advice}{LABEL_FREE_HINT}.")


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class ImportResult:
    pool: Pool
    report: ImportReport


def import_pool(
    session: Session,
    fileobj: IO[bytes],
    filename: str | None,
    mapping: FieldMapping,
    task_type: str | None = None,
    name: str | None = None,
    *,
    fmt: str | None = None,
    fallback_format: str | None = None,
    reopen: Callable[[], IO[bytes]] | None = None,
    truncate_long: bool = False,
) -> ImportResult:
    """Stream `fileobj` into a new pool. `task_type` None: detected from the first 1,000 answers.
    `mapping.guess`: the fields are chosen from the file's own (see `guess_mapping`).
    `fileobj` is read once, front to back; `reopen` (see `PoolFileReader`) serves the rare re-read.
    Prompts longer than BUDGETLAB_MAX_PROMPT_CHARS are refused (the file's problem), or cut when `truncate_long`.
    Raises `IngestError` (the caller rolls back) when anything is wrong with the file."""
    source_format = resolve_format(filename, fmt, fallback_format)
    task_type = check_task_type(task_type)
    task_type_given = task_type is not None
    reader = PoolFileReader(fileobj, source_format, mapping, reopen=reopen,
                            max_prompt_chars=get_settings().max_prompt_chars, truncate_long=truncate_long)

    pool = Pool(name=(name or filename or "pool").strip() or "pool", task_type=task_type or "exact",
                has_answers=mapping.answer_field is not None, source_filename=filename,
                source_format=source_format)
    staged = session.get_bind().dialect.name == "sqlite"
    if not staged:  # COPY needs the pool's id; SQLite inserts the pool row last (see the module's docstring)
        session.add(pool)
        session.flush()
    pool_id = pool.id

    batches: Iterator[list[Row]] = reader.batches()
    first = next(batches, None)  # the first batch settles a guessed mapping
    batches = chain((first,), batches) if first is not None else batches
    fields_guessed, mapping = mapping.guess, reader.mapping
    has_answers = mapping.answer_field is not None
    sample: list[str] = []
    if has_answers and task_type is None:
        buffered: list[list[Row]] = []
        for batch in batches:
            buffered.append(batch)
            sample.extend(row[3] for row in batch if row[3] is not None)
            if len(sample) >= DETECTION_ANSWERS:
                break
        sample = sample[:DETECTION_ANSWERS]
        batches = chain(buffered, batches)
    if task_type is None:
        task_type = detect_task_type(sample)
    grader = _Grader(task_type, reader.unit)

    with (_StagedPromptWriter if staged else _PromptWriter)(session) as writer:
        for batch in batches:
            if has_answers:
                rows = grader.prompt_rows(pool_id, batch)
            else:
                rows = [(pool_id, position, external_id, text, None, None)
                        for position, external_id, text, _answer, _locator in batch]
            writer.write(rows)
        problems = reader.problems()
        if has_answers:
            problem = grader.problem(reader.row_count, mapping.answer_field)
            if problem:
                problems.append(problem)
        if problems:
            raise IngestError(422, " ".join(problems) if len(problems) == 1 else
                              " ".join(f"({i}) {p}" for i, p in enumerate(problems, 1)),
                              details={"problems": problems})

    pool.task_type = task_type
    pool.has_answers = has_answers
    pool.prompt_count = reader.row_count
    writer.publish(pool)
    detected = has_answers and not task_type_given
    if not has_answers:
        reason = "there are no answers, so probes measure agreement (label-free)"
    elif detected:
        reason = f"detected from the first {len(sample)} answers: {describe_answers(sample, task_type)}"
    else:
        reason = "given with the upload (task_type or the preset)"
    report = ImportReport(prompt_field=mapping.prompt_field, answer_field=mapping.answer_field,
                          id_field=mapping.id_field, fields_guessed=fields_guessed, task_type=task_type,
                          task_type_detected=detected, task_type_reason=reason,
                          truncated_prompts=reader.long_prompt_count if truncate_long else 0)
    return ImportResult(pool, report)


def create_demo_pool(session: Session, *, count: int = DEMO_COUNT, seed: int = DEMO_SEED,
                     held_out: bool = False) -> Pool:
    """The generated demo pool (backend.pools.demo): 200 one-step number tasks in nine families of graded
    difficulty, numeric answers.

    ``held_out``: 180 other problems of the same families (none the same as a demo-pool one, even with its
    numbers reordered) to evaluate training runs on."""
    problems = held_out_problems() if held_out else demo_problems(count, seed)
    pool = Pool(name=HELD_OUT_POOL_NAME if held_out else DEMO_POOL_NAME, task_type="numeric", has_answers=True,
                prompt_count=len(problems),
                source_filename=None, source_format="generated")
    session.add(pool)
    session.flush()
    with _PromptWriter(session) as writer:
        writer.write([(pool.id, position, p.external_id, p.text, p.answer, parse_gold(p.answer, "numeric"))
                      for position, p in enumerate(problems)])
    return pool


# --- reading ------------------------------------------------------------------------------------------


def list_pools(session: Session, *, limit: int | None = None, offset: int = 0) -> list[Pool]:
    return list(session.exec(select(Pool).order_by(Pool.id.desc()).offset(offset).limit(limit)))


def get_pool(session: Session, pool_id: int) -> Pool:
    return get_or_404(session, Pool, pool_id)


def latest_scored_probe_id(session: Session, pool_id: int) -> int | None:
    """The newest probe of the whole pool by a model itself (not a trained run's re-probe) whose job succeeded."""
    pool_size = select(Pool.prompt_count).where(Pool.id == pool_id).scalar_subquery()
    query = (select(Probe.id).join(Job, Job.id == Probe.job_id)
             .where(Probe.pool_id == pool_id, Job.status == JobStatus.succeeded.value,
                    Probe.adapter_path.is_(None), Probe.prompt_count == pool_size)
             .order_by(Probe.created_at.desc(), Probe.id.desc()).limit(1))
    return session.exec(query).first()


def list_prompts(
    session: Session,
    pool_id: int,
    order: PromptOrder = "position",
    probe_id: int | None = None,
    limit: int = 50,
    offset: int = 0,
) -> PromptPage:
    """A page of the pool's prompts with their scores from `probe_id` (default: the newest probe whose job
    succeeded). order: position, difficulty (easiest first) or -difficulty (hardest first); unscored
    prompts come last, ties in file order."""
    pool = get_pool(session, pool_id)
    if order not in ("position", "difficulty", "-difficulty"):
        raise AppError(422, f"Unknown order {order!r}; use position, difficulty or -difficulty.")
    limit = min(limit, MAX_PAGE)  # limit and offset are bounded by the router's schema
    if probe_id is None:
        probe_id = latest_scored_probe_id(session, pool_id)
    else:
        probe = session.get(Probe, probe_id)
        if probe is None or probe.pool_id != pool_id:
            raise AppError(404, f"Probe {probe_id} is not a probe of pool {pool_id}; list the pool's probes with "
                                f"GET /api/probes?pool_id={pool_id}, or leave probe_id out to use the newest.")

    score = PromptScore.__table__.c
    prompt = Prompt.__table__.c
    columns = [prompt.id, prompt.position, prompt.external_id, prompt.text, prompt.answer, prompt.gold]
    score_names = ("k", "correct_count", "pass_rate", "wilson_low", "wilson_high", "agreement",
                   "majority_answer", "base_wrong", "difficulty")
    if probe_id is not None:
        query = (select(*columns, *(score[n] for n in score_names))
                 .select_from(Prompt.__table__.outerjoin(
                     PromptScore.__table__, (score.prompt_id == prompt.id) & (score.probe_id == probe_id))))
    else:
        query = select(*columns)
    query = query.where(prompt.pool_id == pool_id)
    if order != "position" and probe_id is not None:
        key = score.difficulty.asc() if order == "difficulty" else score.difficulty.desc()
        query = query.order_by(key.nulls_last(), prompt.position)
    else:
        query = query.order_by(prompt.position)
    result = session.connection().execute(query.limit(limit).offset(offset))
    items = [PromptRead(**row._mapping) for row in result]
    return PromptPage(total=pool.prompt_count, limit=limit, offset=offset, order=order, probe_id=probe_id,
                      items=items)


# --- deletion ------------------------------------------------------------------------------------------


def delete_pool(session: Session, pool_id: int) -> None:
    """Delete a pool and, through ON DELETE CASCADE, its prompts, probes, scores, samples and subsets,
    in one statement. Refused (409) while one of its probes is still queued or running."""
    active = session.exec(
        select(Job.id).join(Probe, Probe.job_id == Job.id)
        .where(Probe.pool_id == pool_id, Job.status.in_(_ACTIVE_JOB_STATUSES)).limit(1)
    ).first()
    if active is not None:
        get_pool(session, pool_id)
        raise AppError(409, f"Pool {pool_id} is being probed by job {active}; cancel it first "
                            f"(POST /api/jobs/{active}/cancel) and delete the pool when it has stopped.")
    probe_ids = session.exec(select(Probe.id).where(Probe.pool_id == pool_id)).all()
    result = session.execute(delete(Pool).where(Pool.id == pool_id).execution_options(synchronize_session=False))
    if result.rowcount == 0:
        raise not_found("Pool", pool_id)
    forget_probes(session, probe_ids)
    session.expire_all()

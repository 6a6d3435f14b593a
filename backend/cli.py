"""`budgetlab`: the same flow as the browser, from a terminal.

Commands talk to the configured database directly (DATABASE_URL, or the embedded SQLite file);
jobs go to the configured broker, or run in this process with --local.
"""

import os
import signal
import sys
import time
from pathlib import Path

import typer
from tqdm import tqdm

import backend.job_kinds  # noqa: F401  (registers every job kind)
from backend.settings import DEFAULT_MODEL, get_settings

app = typer.Typer(help="Budgetlab: probe prompt difficulty, plan a labeling budget, export the subset.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
pool_app = typer.Typer(help="Prompt pools.", no_args_is_help=True)
token_app = typer.Typer(help="API tokens.", no_args_is_help=True)
user_app = typer.Typer(help="Users and their roles (viewer, manager, admin).", no_args_is_help=True)
app.add_typer(pool_app, name="pool")
app.add_typer(token_app, name="token")
app.add_typer(user_app, name="user")
labels_app = typer.Typer(help="Send prompts to annotators and bring their labels back.", no_args_is_help=True)
app.add_typer(labels_app, name="labels")

WORKER_ARGS = ["-m", "celery", "-A", "worker.main", "worker", "-Q", "cpu,gpu", "--loglevel=INFO",
               "--without-gossip", "--without-mingle"]


def _fail(message: str) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(1)


def _session(*, immediate: bool = True):
    from backend.database import session_scope

    return session_scope(immediate=immediate)


def _app_errors(func):
    """Show an AppError's message (what was wrong and what to do) instead of a traceback."""
    import functools

    from backend.errors import AppError

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AppError as exc:
            _fail(f"Error ({exc.status_code}): {exc.message}")

    return wrapper


@app.command()
def migrate() -> None:
    """Bring the database to the current schema (alembic upgrade head)."""
    from backend.migrate import upgrade_head

    upgrade_head()
    typer.echo("Database is at the current schema.")


def _prepare() -> None:
    """Migrate and make sure an admin can sign in; a generated password and token are printed this once."""
    from backend.auth.service import ensure_first_admin
    from backend.jobs.broker import declare_queues
    from backend.migrate import upgrade_head

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade_head()
    declare_queues()  # before any API or worker process publishes to or consumes from them
    with _session() as session:
        printed = ensure_first_admin(session, settings.admin_token, settings.admin_password)
    for what, secret in printed.items():
        typer.secho(f"\n  Admin {what} (user 'admin', shown once, keep it): {secret}\n", fg=typer.colors.GREEN,
                    bold=True)


@app.command()
def serve(
    worker: bool = typer.Option(True, help="Also start a local worker process (the embedded default)."),
    reload: bool = typer.Option(False, help="Reload on code changes (development)."),
    reconcile: bool = typer.Option(True, help="Also run the reconciler, which recovers lost and unsent jobs."),
) -> None:
    """Start the API and web UI (and a local worker) on BUDGETLAB_HOST:BUDGETLAB_PORT, with the reconciler."""
    import uvicorn

    from backend.jobs.reconciler import Reconciler
    from backend.local_worker import LocalWorker

    settings = get_settings()
    _prepare()
    local_worker = None
    # uvicorn re-raises SIGTERM after its graceful shutdown; turn it into an exit so the
    # `finally` below still stops the worker instead of orphaning it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if worker:
        # One process, one task at a time: the embedded default runs on one CPU model instance.
        local_worker = LocalWorker([*WORKER_ARGS, "--pool=solo"],
                                   log=lambda message: typer.secho(message, fg=typer.colors.YELLOW, err=True))
        local_worker.start()
    reconciler = Reconciler().start() if reconcile else None
    typer.echo(f"Budgetlab on http://{settings.host}:{settings.port}  (database: "
               f"{'SQLite ' + str(settings.data_dir) if settings.is_sqlite else 'DATABASE_URL'})")
    try:
        uvicorn.run("backend.app:create_app", factory=True, host=settings.host, port=settings.port,
                    reload=reload, log_level="info")
    finally:
        if reconciler is not None:
            reconciler.stop()
        if local_worker is not None:
            local_worker.stop()


@app.command()
def reconcile(
    every: float = typer.Option(None, help="Seconds between passes (default BUDGETLAB_RECONCILE_SECONDS)."),
    once: bool = typer.Option(False, help="Run one pass, print what it did, and exit."),
) -> None:
    """Find lost, stuck and unsent jobs and recover them (what `serve` runs in the background). Deployments
    run it as a service of its own; several may run at once."""
    import logging

    from backend.jobs.reconciler import reconcile_once

    _prepare()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    interval = every or get_settings().reconcile_seconds
    while True:
        try:
            done = reconcile_once()
            if once:
                typer.echo(f"reconciler: {done}")
                return
        except Exception as exc:  # the database may be briefly away: the next pass tries again
            if once:
                raise
            logging.getLogger("budgetlab.reconcile").warning("pass failed: %s", exc)
        time.sleep(interval)


@app.command("worker")
def run_worker(
    queues: str = typer.Option("cpu,gpu", help="Queues to consume."),
    concurrency: int = typer.Option(1, help="Tasks at a time; GPU workers keep 1 per GPU."),
) -> None:
    """Run a Celery worker for the configured broker."""
    _prepare()
    args = [sys.executable, *WORKER_ARGS]
    args[args.index("cpu,gpu")] = queues
    args += ["--pool=solo"] if concurrency == 1 else [f"--concurrency={concurrency}"]
    os.execv(sys.executable, args)


def _user_named(session, name: str):
    from backend.auth.service import find_user

    user = find_user(session, name)
    if user is None:
        _fail(f"No user named {name!r}: list them with 'budgetlab user list'.")
    return user


@token_app.command("create")
def token_create(name: str = typer.Option("cli", help="A label for the token."),
                 user: str = typer.Option("admin", help="The user the token belongs to."),
                 role: str | None = typer.Option(None, help="viewer, manager or admin: the user's role or a "
                                                            "narrower one (default: the user's)."),
                 days: float | None = typer.Option(None, help="Expires after this many days (default: never)."),
                 ) -> None:
    """Create an API token (printed once)."""
    from datetime import timedelta

    from backend.auth.service import AuthError, create_token
    from backend.timeutil import utcnow

    _prepare()
    with _session() as session:
        owner = _user_named(session, user)
        try:
            expires = utcnow() + timedelta(days=days) if days is not None else None
            typer.echo(create_token(session, owner, name, role=role, expires_at=expires)[1])
        except AuthError as exc:
            _fail(f"Token not created: {exc}.")


@user_app.command("add")
def user_add(name: str = typer.Argument(..., help="The user's name, for sign-in."),
             role: str = typer.Option("viewer", help="viewer, manager or admin."),
             password: str | None = typer.Option(None, help="For the browser (asked for when left out; empty: "
                                                            "tokens only).")) -> None:
    """Create a user."""
    from backend.auth.service import AuthError, create_user

    if password is None:
        password = typer.prompt("Password (empty: tokens only)", default="", hide_input=True,
                                confirmation_prompt=True, show_default=False)
    _prepare()
    with _session() as session:
        try:
            user = create_user(session, name, role, password or None)
        except AuthError as exc:
            _fail(f"User not created: {exc}.")
        typer.echo(f"user {user.id}: {user.name} ({user.role})")


@user_app.command("passwd")
def user_passwd(name: str = typer.Argument(..., help="The user's name."),
                password: str | None = typer.Option(None, help="The new password (asked for when left out).")) -> None:
    """Set a user's password (ends their browser sessions)."""
    from backend.auth.service import AuthError, update_user

    if password is None:
        password = typer.prompt("New password", hide_input=True, confirmation_prompt=True)
    _prepare()
    with _session() as session:
        user = _user_named(session, name)
        try:
            update_user(session, user, password=password)
        except AuthError as exc:
            _fail(f"Password not changed: {exc}.")
        typer.echo(f"password of {name} changed")


@user_app.command("list")
def user_list() -> None:
    """Every user with their role."""
    from sqlmodel import select

    from backend.auth.tables import User

    _prepare()
    with _session() as session:
        for user in session.exec(select(User).order_by(User.id)):
            typer.echo(f"{user.id:>4} {user.name:<24} {user.role:<8} "
                       f"{'disabled' if user.disabled else 'active'}")


@pool_app.command("import")
@_app_errors
def pool_import(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL, CSV, Parquet or BBH JSON file."),
    name: str | None = typer.Option(None, help="Pool name (default: the file name)."),
    preset: str | None = typer.Option(None, help="gsm8k, bbh or math500."),
    prompt_field: str | None = typer.Option(None, help="Field holding the prompt (none named: all guessed from "
                                                       "common names such as question, answer, id)."),
    answer_field: str | None = typer.Option(None, help="Field holding the gold answer (name only --prompt-field "
                                                       "for a label-free pool)."),
    id_field: str | None = typer.Option(None, help="Field holding the prompt id (optional)."),
    task_type: str | None = typer.Option(None, help="numeric, math, choice or exact (default: detected)."),
    format: str | None = typer.Option(None, help="jsonl, csv, parquet or json (default: from the extension)."),
    truncate_long: bool = typer.Option(False, help="Cut prompts longer than BUDGETLAB_MAX_PROMPT_CHARS instead of "
                                                   "refusing the file."),
) -> None:
    """Import a pool file, streamed into the database in one transaction."""
    from backend.pools.presets import resolve_upload_options
    from backend.pools.service import import_pool

    _prepare()
    mapping, detected_type, fallback = resolve_upload_options(
        preset, prompt_field=prompt_field, answer_field=answer_field, id_field=id_field, task_type=task_type)
    with open(path, "rb") as raw, tqdm.wrapattr(raw, "read", total=path.stat().st_size, unit="B",
                                                unit_scale=True, desc="import") as handle:
        with _session(immediate=False) as session:  # staged: SQLite's write lock only for the final switch
            result = import_pool(session, handle, path.name, mapping, detected_type, name, fmt=format,
                                 fallback_format=fallback, truncate_long=truncate_long)
            pool = result.pool
            typer.echo(f"Pool {pool.id}: {pool.prompt_count} prompts, task type {pool.task_type}"
                       f"{'' if pool.has_answers else ' (no answers: label-free probing)'}.")
            typer.echo(result.report.summary())


@app.command()
@_app_errors
def demo(held_out: bool = typer.Option(False, help="Create the 180-problem held-out pool to evaluate on.")) -> None:
    """Create the demo pool: 200 one-step number tasks in nine families the embedded model sometimes solves."""
    from backend.pools.service import create_demo_pool

    _prepare()
    with _session() as session:
        pool = create_demo_pool(session, held_out=held_out)
        typer.echo(f"Created demo pool {pool.id} ({pool.prompt_count} prompts, task type {pool.task_type}).")


@app.command()
@_app_errors
def probe(
    pool_id: int,
    model: str = typer.Option(DEFAULT_MODEL, help="Model name (budgetlab models) or checkpoint directory."),
    k: int | None = typer.Option(None, help="Samples per prompt (default 8; 10 with --preset paper)."),
    temperature: float | None = typer.Option(None, help="Sampling temperature (default 1.0)."),
    max_new_tokens: int | None = typer.Option(None, help="New tokens per sample (default 256; 250 with the paper "
                                                          "preset)."),
    template: str | None = typer.Option(None, help="Prompt template containing {prompt}."),
    chat_template_options: str | None = typer.Option(
        None, help='JSON object passed to the chat template, e.g. \'{"enable_thinking": false}\' for Qwen3.'),
    grading_policy: str | None = typer.Option(
        None, help="strict (last \\boxed{} only, exact: the paper) or lenient (default lenient; strict with "
                   "--preset paper)."),
    preset: str | None = typer.Option(None, help="paper: k 10, temperature 1.0, 250 tokens, strict grading; demo (the "
                                                 "demo pool on the embedded model): k 8, temperature 0.7, 16 "
                                                 "tokens, a terse template."),
    seed: int = typer.Option(0),
    local: bool = typer.Option(False, help="Run in this process instead of sending it to a worker."),
) -> None:
    """Probe a pool: k samples per prompt, graded, scored. Shows a progress bar until it ends."""
    from pydantic import ValidationError

    from backend.probes.schemas import ProbeCreate
    from backend.probes.service import create_probe
    from backend.prompting import check_chat_template_options

    _prepare()
    given = {name: value for name, value in {"k": k, "temperature": temperature, "max_new_tokens": max_new_tokens,
                                             "grading_policy": grading_policy, "preset": preset,
                                             "template": template}.items()
             if value is not None}
    try:
        body = ProbeCreate(pool_id=pool_id, model=model, seed=seed, **given,
                           chat_template_options=check_chat_template_options(chat_template_options))
    except (ValueError, ValidationError) as exc:  # pydantic's errors name the option and the allowed values
        _fail(f"Error: {exc}")
    with _session() as session:
        created = create_probe(session, body, get_settings().probe_shard_size)
        probe_id, job_id = created.id, created.job_id
        typer.echo(f"Probe {probe_id} (job {job_id}) on pool {pool_id}.")
        if not local:
            from backend.jobs.dispatch import commit_and_send

            problems = commit_and_send(session, [job_id])
            typer.echo("Queued; a worker (budgetlab worker, or budgetlab serve) runs it. Ctrl-C stops watching."
                       + (f" Not sent yet: {problems[0]}; the reconciler sends it later." if problems else ""))
    if local:
        _run_here_in_background(job_id)
    job = _watch(job_id)
    if job.status != "succeeded":
        _fail(f"Probe job {job_id} ended {job.status}: {job.error or job.message}")
    typer.echo(f"Done: probe {probe_id}. Next: budgetlab preview {probe_id} --strategy hard --fraction 0.1")


def _run_here_in_background(job_id: int) -> None:
    """Run the job's tasks on a thread of this process (--local), while the caller watches its row. Whatever
    escapes the engine fails the job, so the watch always ends."""
    import threading

    from backend.jobs.engine import fail_job, run_here

    def run() -> None:
        try:
            run_here(job_id)
        except BaseException as exc:
            fail_job(job_id, f"The job stopped in this process: {type(exc).__name__}: {exc}")
            raise

    threading.Thread(target=run, daemon=True).start()


def _watch(job_id: int, unit: str = "prompt"):
    from backend.jobs.tables import FINISHED, Job

    with tqdm(unit=unit, desc=f"job {job_id}") as bar:
        while True:
            with _session() as session:
                job = session.get(Job, job_id)
            bar.total = job.progress_total
            bar.n = job.progress_done
            bar.set_postfix_str(job.message[:60])
            bar.refresh()
            if job.status in FINISHED:
                return job
            time.sleep(1.0)


def _selection_body(probe_id, strategy, count, fraction, money, cost_per_prompt, group_size, band_low,
                    band_high, seed) -> dict:
    given = [(kind, value) for kind, value in (("count", count), ("fraction", fraction), ("money", money))
             if value is not None]
    if len(given) != 1:
        _fail("Give exactly one budget: --count N, --fraction F or --money M (with --cost-per-prompt).")
    kind, value = given[0]
    return {"probe_id": probe_id, "strategy": strategy,
            "budget": {"kind": kind, "value": value, "cost_per_prompt": cost_per_prompt},
            "group_size": group_size, "band_low": band_low, "band_high": band_high, "seed": seed}


_BUDGET_OPTIONS = dict(
    strategy=typer.Option("hard", help="hard, easy, medium, random, base_wrong, base_right, band, learnable or all "
                                       "(the whole pool, whatever the budget)."),
    count=typer.Option(None, help="Budget as a number of prompts."),
    fraction=typer.Option(None, help="Budget as a fraction of the pool."),
    money=typer.Option(None, help="Budget as money (with --cost-per-prompt)."),
    cost_per_prompt=typer.Option(None),
    group_size=typer.Option(8, help="GRPO group size G."),
    band_low=typer.Option(0.1), band_high=typer.Option(0.9), seed=typer.Option(0),
)


@app.command()
@_app_errors
def preview(
    probe_id: int, strategy: str = _BUDGET_OPTIONS["strategy"], count: int | None = _BUDGET_OPTIONS["count"],
    fraction: float | None = _BUDGET_OPTIONS["fraction"], money: float | None = _BUDGET_OPTIONS["money"],
    cost_per_prompt: float | None = _BUDGET_OPTIONS["cost_per_prompt"],
    group_size: int = _BUDGET_OPTIONS["group_size"], band_low: float = _BUDGET_OPTIONS["band_low"],
    band_high: float = _BUDGET_OPTIONS["band_high"], seed: int = _BUDGET_OPTIONS["seed"],
) -> None:
    """Preview a selection and compare every strategy at the same N."""
    from pydantic import ValidationError

    from backend.subsets.schemas import SelectionRequest
    from backend.subsets.service import preview as preview_selection

    body = _selection_body(probe_id, strategy, count, fraction, money, cost_per_prompt, group_size, band_low,
                           band_high, seed)
    try:
        request = SelectionRequest(**body)
    except ValidationError as exc:
        _fail(str(exc))
    with _session() as session:
        result = preview_selection(session, request)
    if result.warning:
        typer.secho(result.warning, fg=typer.colors.YELLOW)
    if result.caveat:
        typer.secho(result.caveat, fg=typer.colors.YELLOW)
    agreement = result.difficulty_basis == "agreement"
    forecast = ("no learnable-share forecast (label-free)" if result.predicted_learnable_share is None else
                f"predicted learnable share at step 0 {result.predicted_learnable_share:.3f} (95% "
                f"{result.predicted_learnable_share_low:.3f}-{result.predicted_learnable_share_high:.3f})")
    typer.echo(f"{result.strategy}: {result.n} of {result.pool_size} prompts, {forecast}")
    mean_name = "mean agree" if agreement else "mean pass"
    typer.echo(f"\n{'strategy':<11} {'N':>7} {'learnable':>10} {mean_name:>10} {'overlap hard':>13}")
    for row in result.comparison:
        mean = row.mean_agreement if agreement else row.mean_pass_rate
        share, mean, overlap = ("-" if x is None else f"{x:.3f}"
                                for x in (row.predicted_learnable_share, mean, row.overlap_with_hard))
        typer.echo(f"{row.strategy:<11} {row.n_picked:>7} {share:>10} {mean:>10} {overlap:>13}")


@app.command()
@_app_errors
def freeze(
    probe_id: int, name: str | None = typer.Option(None, help="Subset name."),
    strategy: str = _BUDGET_OPTIONS["strategy"], count: int | None = _BUDGET_OPTIONS["count"],
    fraction: float | None = _BUDGET_OPTIONS["fraction"], money: float | None = _BUDGET_OPTIONS["money"],
    cost_per_prompt: float | None = _BUDGET_OPTIONS["cost_per_prompt"],
    group_size: int = _BUDGET_OPTIONS["group_size"], band_low: float = _BUDGET_OPTIONS["band_low"],
    band_high: float = _BUDGET_OPTIONS["band_high"], seed: int = _BUDGET_OPTIONS["seed"],
) -> None:
    """Freeze a selection as a subset (reproducible from its recorded inputs)."""
    from pydantic import ValidationError

    from backend.subsets.schemas import SubsetCreate
    from backend.subsets.service import freeze as freeze_subset

    body = _selection_body(probe_id, strategy, count, fraction, money, cost_per_prompt, group_size, band_low,
                           band_high, seed)
    try:
        request = SubsetCreate(**body, name=name)
    except ValidationError as exc:
        _fail(str(exc))
    with _session() as session:
        subset = freeze_subset(session, request)
        typer.echo(f"Subset {subset.id}: {subset.name} ({subset.n} prompts). "
                   f"Export: budgetlab export {subset.id} --format jsonl")


@app.command("export")
@_app_errors
def export_subset(
    subset_id: int, format: str = typer.Option("jsonl", help="jsonl, csv or parquet."),
    output: Path | None = typer.Option(None, help="Output file (default subset-<id>.<format>)."),
) -> None:
    """Export a frozen subset for TRL's GRPOTrainer (prompt, answer, id, difficulty)."""
    import shutil

    from backend.subsets import export
    from backend.subsets.service import get_subset

    if format not in export.FORMATS:
        _fail(f"Unknown format '{format}'; use one of: {', '.join(export.FORMATS)}.")
    output = output or Path(f"subset-{subset_id}.{format}")
    with _session() as session:
        subset = get_subset(session, subset_id)
        rows = export.export_rows(session, subset)
        if format == "parquet":
            shutil.move(export.write_parquet(rows), output)
        else:
            chunks = export.jsonl_chunks(rows) if format == "jsonl" else export.csv_chunks(rows)
            with open(output, "wb") as handle:
                for chunk in tqdm(chunks, unit="batch", desc="export"):
                    handle.write(chunk)
    typer.echo(f"Wrote {subset.n} rows to {output}")


@labels_app.command("export")
@_app_errors
def labels_export(
    subset_id: int,
    format: str = typer.Option("label-studio", help="label-studio (tasks JSON), label-studio-config (XML), "
                                                    "argilla (zip for rg.Dataset.from_disk), csv or jsonl "
                                                    "(id, prompt, answer)."),
    output: Path | None = typer.Option(None, help="Output file (default: a name with the subset and format)."),
) -> None:
    """Export a frozen subset's prompts for annotators (recorded as sent for labeling)."""
    from backend.database import get_or_404
    from backend.labels.export import MEDIA, export_file
    from backend.labels.labeling_rows import subset_rows
    from backend.labels.service import record_export
    from backend.pools.tables import Pool
    from backend.subsets.service import get_subset

    if format not in MEDIA:
        _fail(f"Unknown format '{format}'; use one of: {', '.join(MEDIA)}.")
    with _session() as session:
        subset = get_subset(session, subset_id)
        pool = get_or_404(session, Pool, subset.pool_id)
        rows = subset_rows(session, subset)
        content, name = export_file(pool.task_type, pool.id, rows, format, f"subset-{subset.id}")
        if format != "label-studio-config":
            record_export(session, pool.id, subset.id, format, len(rows), "cli")
    output = output or Path(name)
    output.write_bytes(content)
    typer.echo(f"Wrote {len(rows)} prompts to {output}")


def _show_import(report: dict, label_set) -> None:
    typer.echo(f"{report['matched']} prompts matched ({report['new']} new, {report['changed']} changed, "
               f"{report['unchanged']} unchanged) from {report['annotations']} annotations.")
    from backend.labels.resolve import PROBLEMS

    for key, words in PROBLEMS.items():
        if report[key]["count"]:
            typer.echo(f"  {report[key]['count']} {words}, e.g. {report[key]['examples'][:3]}")
    if label_set is not None:
        typer.echo(f"Label set {label_set.id}: {label_set.label_count} labels (undo: budgetlab labels undo "
                   f"{label_set.id}).")
    elif report.get("dry_run"):
        typer.echo("Dry run: nothing was changed.")
    if report.get("regrade_job_id"):
        typer.echo(f"Re-grading the probes' samples in job {report['regrade_job_id']}.")


def _send_regrade(session, outcome, pool_id: int) -> None:
    if outcome.regrade_job_id:
        from backend.jobs.dispatch import commit_and_send

        commit_and_send(session, [outcome.regrade_job_id])


@labels_app.command("import")
@_app_errors
def labels_import(
    pool_id: int, file: Path,
    dry_run: bool = typer.Option(False, help="Show the report; change nothing."),
) -> None:
    """Import labels (Label Studio or Argilla export, or CSV/JSONL with id and answer) into a pool."""
    from backend.database import get_or_404
    from backend.labels.formats import LabelFileError, parse_labels
    from backend.labels.service import import_labels
    from backend.pools.tables import Pool

    if not file.is_file():
        _fail(f"{file} is not a file.")
    try:
        parsed = parse_labels(file.name, file.read_bytes())
    except LabelFileError as exc:
        _fail(f"{file}: {exc} Nothing was imported.")
    with _session() as session:
        outcome = import_labels(session, get_or_404(session, Pool, pool_id), parsed, file.name, "cli",
                                dry_run=dry_run)
        _show_import(outcome.report, outcome.label_set)
        _send_regrade(session, outcome, pool_id)


@labels_app.command("undo")
@_app_errors
def labels_undo(label_set_id: int) -> None:
    """Put back the answers a label set replaced."""
    from backend.labels.service import get_label_set, undo

    with _session() as session:
        label_set = get_label_set(session, label_set_id)
        outcome = undo(session, label_set, "cli")
        typer.echo(f"Label set {label_set_id} undone: {outcome.report['restored']} answers restored, "
                   f"{outcome.report['kept_later_answers']} kept from later imports.")
        _send_regrade(session, outcome, label_set.pool_id)


@labels_app.command("regrade")
@_app_errors
def labels_regrade(pool_id: int) -> None:
    """Re-grade the stored samples of a pool's probes against its answers now (after a re-grading job failed)."""
    from backend.database import get_or_404
    from backend.labels.service import regrade_all
    from backend.pools.tables import Pool

    with _session() as session:
        outcome = regrade_all(session, get_or_404(session, Pool, pool_id), "cli")
        if outcome.regrade_job_id:
            typer.echo(f"Re-grading in job {outcome.regrade_job_id}.")
        else:
            typer.echo(f"Re-graded {outcome.report['regraded']['samples']} samples of "
                       f"{outcome.report['regraded']['probes']} probes.")
        _send_regrade(session, outcome, pool_id)


@labels_app.command("connect")
@_app_errors
def labels_connect(url: str, api_key: str = typer.Option(..., prompt=True, hide_input=True,
                                                         help="Label Studio API token (Account & Settings).")) -> None:
    """Save the Label Studio server (checked first; the key is never shown again)."""
    from backend.labels.connection import save_connection

    with _session() as session:
        save_connection(session, url, api_key, "cli")
    typer.echo(f"Label Studio at {url.rstrip('/')} saved.")


def _label_job(subset_id: int, action: str) -> None:
    from backend.labels.connection import client_for
    from backend.labels.service import create_label_job
    from backend.labels.tables import LabelJob
    from backend.subsets.service import get_subset

    _prepare()
    with _session() as session:
        subset = get_subset(session, subset_id)
        client_for(session)
        job_id = create_label_job(session, action, subset.pool_id, subset.id, "cli", total=subset.n).id
    # In this process, like probe --local: the job row still records progress and the outcome.
    _run_here_in_background(job_id)
    try:
        job = _watch(job_id, unit="task" if action == "push" else "step")
    except KeyboardInterrupt:  # the job runs in this process: it ends with it, so say so on its row
        from backend.jobs.service import fail_unless_finished

        with _session() as session:
            fail_unless_finished(session, job_id, f"Stopped: the CLI running this {action} was interrupted.")
        raise
    if job.status != "succeeded":
        _fail(f"{action} job {job_id} {job.status}: {job.error or job.message}")
    with _session() as session:
        result = session.get(LabelJob, job_id).result
    if action == "push":
        typer.echo(f"Sent {result['tasks']} prompts to {result['project_url']}")
    else:
        from backend.labels.service import get_label_set

        with _session() as session:
            label_set = result["label_set_id"] and get_label_set(session, result["label_set_id"])
            _show_import(result["report"], label_set or None)


@labels_app.command("push")
@_app_errors
def labels_push(subset_id: int) -> None:
    """Create a Label Studio project for a subset and import its prompts as tasks."""
    _label_job(subset_id, "push")


@labels_app.command("pull")
@_app_errors
def labels_pull(subset_id: int) -> None:
    """Fetch the finished annotations of the subset's Label Studio project and import them."""
    _label_job(subset_id, "pull")


def _settings_overrides(pairs: list[str]) -> dict:
    """--set key=value pairs; values are read as JSON where they parse (numbers, lists), else as text."""
    import json

    overrides = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            _fail(f"--set {pair!r}: write key=value, for example --set max_steps=20 or --set eval_pool_id=3.")
        try:
            overrides[key.strip()] = json.loads(raw)
        except ValueError:
            overrides[key.strip()] = raw
    return overrides


_TRAINING_OPTIONS = dict(
    preset=typer.Option("quick_cpu", help="Training preset: quick_cpu or paper."),
    set_=typer.Option([], "--set", help="Override a training setting: --set max_steps=20 (repeatable)."),
    local=typer.Option(False, help="Train in this process instead of sending the runs to a worker."),
    allow_other_model=typer.Option(False, help="Train the model named by --set model=... although the probe used "
                                               "another (its difficulty forecast then does not apply)."),
)


def _launch_and_watch(session, runs: list, local: bool) -> list:
    """Queue the runs (commit first, ids only) or train them here one after another; returns their final jobs."""
    jobs = [(run.id, run.job_id) for run in runs]
    if local:
        session.commit()
    else:
        from backend.jobs.dispatch import commit_and_send

        problems = commit_and_send(session, [run.job_id for run in runs])
        typer.echo("Queued on the gpu queue; a worker (budgetlab worker, or budgetlab serve) trains them."
                   + (f" Not sent yet: {problems[0]}; the reconciler sends them later." if problems else ""))
    finished = []
    for run_id, job_id in jobs:
        if local:
            _run_here_in_background(job_id)
        job = _watch(job_id, unit="step")
        typer.echo(f"run {run_id}: {job.status}" + (f" ({job.error})" if job.error else ""))
        finished.append(job)
    return finished


@app.command()
@_app_errors
def train(
    subset_id: int,
    preset: str = _TRAINING_OPTIONS["preset"],
    set_: list[str] = _TRAINING_OPTIONS["set_"],
    local: bool = _TRAINING_OPTIONS["local"],
    allow_other_model: bool = _TRAINING_OPTIONS["allow_other_model"],
) -> None:
    """Train a LoRA adapter with GRPO on a frozen subset (the probe's model) and follow it to the end."""
    from backend.runs.service import create_run

    _prepare()
    with _session() as session:
        run = create_run(session, subset_id, _settings_overrides(set_), preset=preset,
                         allow_other_model=allow_other_model)
        run_id = run.id
        typer.echo(f"Run {run_id} (job {run.job_id}) on subset {subset_id}.")
        [job] = _launch_and_watch(session, [run], local)
    if job.status != "succeeded":
        _fail(f"Run {run_id} ended {job.status}: {job.error or job.message}")
    typer.echo(f"Done: run {run_id}; adapter under {get_settings().artifacts / 'runs' / str(run_id) / 'adapter'}.")


@app.command()
@_app_errors
def experiment(
    probe_id: int,
    strategies: str = typer.Option("hard,easy,medium,random,base_wrong,learnable",
                                   help="Comma-separated strategies, one run each."),
    count: int | None = _BUDGET_OPTIONS["count"],
    fraction: float | None = _BUDGET_OPTIONS["fraction"],
    money: float | None = _BUDGET_OPTIONS["money"],
    cost_per_prompt: float | None = _BUDGET_OPTIONS["cost_per_prompt"],
    name: str | None = typer.Option(None),
    seeds: str | None = typer.Option(None, help="Comma-separated seeds: each strategy runs once per seed, and the "
                                                "comparison shows means with 95% intervals."),
    preset: str = _TRAINING_OPTIONS["preset"],
    set_: list[str] = _TRAINING_OPTIONS["set_"],
    local: bool = _TRAINING_OPTIONS["local"],
    allow_other_model: bool = _TRAINING_OPTIONS["allow_other_model"],
) -> None:
    """One subset and one GRPO run per strategy (and seed) at the same budget; waits for them, then prints the
    comparison."""
    from backend.experiments.schemas import ExperimentCreate
    from backend.experiments.service import create_experiment

    _prepare()
    budget = _selection_body(probe_id, "hard", count, fraction, money, cost_per_prompt, 8, 0.1, 0.9, 0)["budget"]
    try:
        seed_list = [int(seed) for seed in seeds.split(",") if seed.strip()] if seeds else None
    except ValueError:
        _fail(f"--seeds {seeds!r}: write whole numbers separated by commas, for example --seeds 0,1,2.")
    body = ExperimentCreate(probe_id=probe_id, budget=budget, name=name, preset=preset, seeds=seed_list,
                            strategies=[s.strip() for s in strategies.split(",") if s.strip()],
                            settings=_settings_overrides(set_), allow_other_model=allow_other_model)
    with _session() as session:
        created, runs = create_experiment(session, body)
        experiment_id = created.id
        typer.echo(f"Experiment {experiment_id}: runs {', '.join(str(run.id) for run in runs)}.")
        _launch_and_watch(session, runs, local)
    compare(experiment_id)


@app.command()
@_app_errors
def compare(experiment_id: int) -> None:
    """Print an experiment's comparison table and the fit of accuracy gain on learnable %."""
    from backend.experiments.service import compare as comparison
    from backend.experiments.service import get_experiment

    with _session() as session:
        result = comparison(session, get_experiment(session, experiment_id))
    typer.echo(format_comparison(result))


def format_comparison(result) -> str:
    def num(value, spec=".3f"):
        return "—" if value is None else format(value, spec)

    def interval(value, bounds, spec=".3f"):
        return num(value, spec) + (f" [{bounds[0]:{spec}}, {bounds[1]:{spec}}]" if bounds else "")

    def gain(row):
        flag = "" if row.gain_beyond_noise is None else (" *" if row.gain_beyond_noise else "")
        return interval(row.gain, row.gain_interval, "+.3f") + flag

    header = ["strategy", "run", "status", "N", "base acc", "final acc [95%]", "gain [95%]", "learnable %",
              "pred. share", "meas. share", "OOD pass@k"]
    lines = [[row.strategy, str(row.run_id), row.status, str(row.n), num(row.base_accuracy),
              interval(row.final_accuracy, row.final_accuracy_interval) + ("" if row.within_noise_of_best
                                                                           is not False else " <"),
              gain(row), num(row.learnable_pct, ".1f"),
              num(row.predicted_learnable_share), num(row.measured_learnable_share),
              ", ".join(f"{k} {v:.3f}" for k, v in row.ood.items()) or "—"] for row in result.table]
    widths = [max(len(cell) for cell in column) for column in zip(header, *lines, strict=True)]
    out = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)) for line in [header, *lines]]
    fit = result.fit
    out.append(f"fit over {fit.n_points} runs: gain = {num(fit.intercept, '+.4f')} + {num(fit.slope, '.5f')} × "
               f"learnable %, R² = {num(fit.r2)}" if fit.slope is not None else
               f"fit over {fit.n_points} runs: undefined (needs two runs with different learnable %)")
    if fit.r2_interval:
        out[-1] += f" (95% bootstrap interval {fit.r2_interval[0]:.3f} to {fit.r2_interval[1]:.3f})"
    out.append("* gain beyond noise (its 95% interval excludes 0); < final accuracy below the best run's beyond noise")
    for summary in result.strategies:
        if summary.runs > 1:
            final = interval(summary.final_accuracy, summary.final_accuracy_interval)
            out.append(f"{summary.strategy}: over {summary.runs} seeds, final {final}, gain "
                       f"{interval(summary.gain, summary.gain_interval, '+.3f')} (mean [95% t interval])")
    return "\n".join(out)


@app.command()
def models() -> None:
    """List the models available for probing."""
    from backend.models_catalog import available_models

    for name, description in available_models().items():
        typer.echo(f"{name:<28} {description}")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":
    main()

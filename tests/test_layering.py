"""Who may import whom (issue 9): the API side (`backend/`) never imports the workers' code (`worker/`), and
the job engine (`backend/jobs/`) knows its kinds only through the registry, never by importing them."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(folder: Path) -> dict[str, set[str]]:
    found = {}
    for path in folder.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def offenders(folder: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """{file: the forbidden modules it imports} for the files of `folder` that import any."""
    found = {path: sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden))
             for path, names in imported_modules(ROOT / folder).items()}
    return {path: names for path, names in found.items() if names}


def test_backend_never_imports_the_worker():
    assert offenders("backend", ("worker",)) == {}


def test_the_job_engine_does_not_import_its_kinds():
    kinds = ("backend.probes", "backend.runs", "backend.labels", "backend.job_kinds", "backend.pools",
             "backend.subsets", "backend.experiments")
    assert offenders("backend/jobs", kinds) == {}


def test_the_checks_see_an_import_when_there_is_one():
    assert "backend.jobs.engine" in imported_modules(ROOT / "worker")["worker/tasks.py"]
    assert offenders("worker", ("backend.jobs",))  # the worker does use the engine

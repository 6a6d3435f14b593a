"""The FastAPI application: API routers under /api, the browser frontend at /."""

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from backend.auth.dependencies import current_token
from backend.auth.middleware import TokenMiddleware
from backend.body_limit import MAX_LABELS_FILE_BYTES, BodyLimitMiddleware
from backend.errors import install_error_handlers, problem_openapi
from backend.params import reject_nul_text, reject_unknown_query

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"
PUBLIC_API = ("/api/health",)  # and everything under them; the rest of /api/* needs a token
UPLOADS = (("POST", "/api/pools", None),  # streams to disk under its own limit, BUDGETLAB_MAX_UPLOAD_BYTES
           ("POST", r"/api/pools/\d+/labels", MAX_LABELS_FILE_BYTES))  # read whole


def is_protected(path: str) -> bool:
    return path.startswith("/api/") and not any(path == p or path.startswith(p + "/") for p in PUBLIC_API)


def create_app() -> FastAPI:
    import backend.job_kinds  # noqa: F401  (registers every job kind)
    from backend.experiments.router import router as experiments_router
    from backend.health import router as health_router
    from backend.jobs.router import router as jobs_router
    from backend.labels.router import router as labels_router
    from backend.models_catalog import router as models_router
    from backend.pools.router import router as pools_router
    from backend.probes.router import router as probes_router
    from backend.runs.router import router as runs_router
    from backend.subsets.router import router as subsets_router

    app = FastAPI(title="Budgetlab", version="0.1.0",
                  description="Probe a base model on a prompt pool, plan a labeling budget, export the subset.")

    install_error_handlers(app)
    # Added last runs first: the token is checked before the body cap, both before routing.
    app.add_middleware(BodyLimitMiddleware, uploads=UPLOADS)
    app.add_middleware(TokenMiddleware, is_protected=is_protected)
    app.openapi = lambda: problem_openapi(app, is_protected)

    app.include_router(health_router, prefix="/api")  # public: see PUBLIC_API

    protected = [Depends(current_token), Depends(reject_unknown_query), Depends(reject_nul_text)]
    for router in (pools_router, probes_router, jobs_router, subsets_router, models_router, runs_router,
                   experiments_router, labels_router):
        app.include_router(router, prefix="/api", dependencies=protected)

    app.mount("/static", StaticFiles(directory=FRONTEND / "static"), name="static")

    @app.get("/static-vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        # Served from the installed plotly package: no CDN, no Node build step.
        import plotly

        return FileResponse(Path(plotly.__file__).parent / "package_data" / "plotly.min.js",
                            media_type="application/javascript")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(FRONTEND / "index.html")

    return app

"""The FastAPI application: API routers under /api, the browser frontend at /."""

from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from backend.auth.dependencies import current_token
from backend.errors import AppError

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"


def create_app() -> FastAPI:
    from backend.experiments.router import router as experiments_router
    from backend.jobs.router import router as jobs_router
    from backend.models_catalog import router as models_router
    from backend.pools.router import router as pools_router
    from backend.probes.router import router as probes_router
    from backend.runs.router import router as runs_router
    from backend.subsets.router import router as subsets_router

    app = FastAPI(title="Budgetlab", version="0.1.0",
                  description="Probe a base model on a prompt pool, plan a labeling budget, export the subset.")

    @app.exception_handler(AppError)
    async def _app_error(_request: Request, exc: AppError) -> JSONResponse:
        body = {"detail": exc.message}
        if exc.details is not None:
            body["details"] = exc.details
        return JSONResponse(body, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']}" for e in exc.errors()]
        return JSONResponse({"detail": "; ".join(problems), "errors": exc.errors()}, status_code=422)

    @app.get("/api/health", tags=["health"])
    def health() -> dict[str, str]:
        return {"status": "ok"}

    protected = [Depends(current_token)]
    for router in (pools_router, probes_router, jobs_router, subsets_router, models_router, runs_router,
                   experiments_router):
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

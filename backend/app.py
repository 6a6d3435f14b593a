"""The FastAPI application: API routers under /api, the browser frontend at /."""

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from backend.auth.access import ACCESS, check_coverage
from backend.auth.dependencies import current_principal
from backend.auth.middleware import AuthMiddleware, api_routes
from backend.auth.ratelimit import FailureLimiter
from backend.body_limit import MAX_LABELS_FILE_BYTES, BodyLimitMiddleware
from backend.errors import install_error_handlers, problem_openapi
from backend.params import reject_nul_text, reject_unknown_query
from backend.security_headers import SecurityHeadersMiddleware
from backend.settings import get_settings

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"
UPLOADS = (("POST", "/api/pools", None),  # streams to disk under its own limit, BUDGETLAB_MAX_UPLOAD_BYTES
           ("POST", r"/api/pools/\d+/labels", MAX_LABELS_FILE_BYTES))  # read whole


def create_app() -> FastAPI:
    import backend.job_kinds  # registers every job kind
    import backend.tables  # noqa: F401  (every table, with the creator names the read models show)
    from backend.audit.router import router as audit_router
    from backend.auth.router import router as auth_router
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
    settings = get_settings()
    app.state.auth_limiter = FailureLimiter(settings.auth_failures_allowed)
    # Added last runs first: who calls and whether they may is checked before the body cap, both before routing.
    app.add_middleware(BodyLimitMiddleware, uploads=UPLOADS)
    app.add_middleware(AuthMiddleware, routes=lambda: app.router.routes, limiter=app.state.auth_limiter,
                       protect_docs=settings.environment != "development")
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: refusals carry the headers too
    app.openapi = lambda: problem_openapi(app, lambda method, path: ACCESS[(method, path)])

    checks = [Depends(reject_unknown_query), Depends(reject_nul_text)]
    app.include_router(health_router, prefix="/api")  # public, as access.py says
    app.include_router(auth_router, prefix="/api", dependencies=checks)  # signing in is public, the rest not
    protected = [Depends(current_principal), *checks]
    for router in (pools_router, probes_router, jobs_router, subsets_router, models_router, runs_router,
                   experiments_router, labels_router, audit_router):
        app.include_router(router, prefix="/api", dependencies=protected)
    check_coverage({(method, route.path) for route in api_routes(app.router.routes) if route.path.startswith("/api/")
                    for method in route.methods if method != "HEAD"})

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

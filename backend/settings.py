"""One settings class, read from the environment (and a .env file if present)."""

from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "SmolLM2-135M-Instruct"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    data_dir: Path = Field(
        Path("./data"), validation_alias="BUDGETLAB_DATA_DIR",
        description="Where the embedded SQLite database and broker live.",
    )
    artifact_dir: Path | None = Field(
        None, validation_alias="BUDGETLAB_ARTIFACT_DIR",
        description="Artifact store (converted models, exports). Default: <data_dir>/artifacts.",
    )
    port: int = Field(8000, validation_alias="BUDGETLAB_PORT", description="HTTP port of the API.")
    host: str = Field("127.0.0.1", validation_alias="BUDGETLAB_HOST")
    admin_token: str | None = Field(
        None, validation_alias="BUDGETLAB_ADMIN_TOKEN",
        description="When set, this is the admin's API token; otherwise one is generated at first start.",
    )
    admin_password: str | None = Field(
        None, validation_alias="BUDGETLAB_ADMIN_PASSWORD",
        description="The first admin's password for the browser; otherwise one is generated at first start.",
    )
    session_hours: float = Field(12, gt=0, validation_alias="BUDGETLAB_SESSION_HOURS",
                                 description="A browser session ends this long after sign-in.")
    secure_cookies: bool = Field(
        False, validation_alias="BUDGETLAB_SECURE_COOKIES",
        description="Mark the session cookie Secure (HTTPS only); set it behind a TLS proxy. Always on for "
                    "requests that arrive over https.",
    )
    auth_failures_allowed: int = Field(
        20, ge=1, validation_alias="BUDGETLAB_AUTH_FAILURES_ALLOWED",
        description="Failed sign-ins and bad credentials one address may send per 5 minutes before it gets 429.",
    )
    max_prompt_chars: int = Field(
        32_000, ge=1, validation_alias="BUDGETLAB_MAX_PROMPT_CHARS",
        description="Longest prompt an upload may hold, in characters: about the 8,192-token context of the default "
                    "model at 4 characters a token. Longer ones fail the upload, or are cut with "
                    "long_prompts=truncate.")
    quota_active_jobs: int = Field(20, ge=1, validation_alias="BUDGETLAB_QUOTA_ACTIVE_JOBS",
                                   description="Unfinished jobs (queued, running, cancelling) one user may have.")
    quota_queued_tokens: int = Field(
        500_000_000, ge=1, validation_alias="BUDGETLAB_QUOTA_QUEUED_TOKENS",
        description="Tokens to generate that one user's unfinished jobs may hold (probe: prompts x k x max new "
                    "tokens; run: steps x batch x completion length).")
    database_url: str | None = Field(
        None, validation_alias="DATABASE_URL",
        description="SQLAlchemy URL. Default: SQLite file under data_dir.",
    )
    broker_url: str | None = Field(
        None, validation_alias="CELERY_BROKER_URL",
        description="Celery broker URL. Default: SQLite-backed broker under data_dir.",
    )
    broker_key_prefix: str = Field(
        "", validation_alias="BUDGETLAB_BROKER_PREFIX",
        description="Prefix for every Redis key of the broker, to share one Redis between deployments.",
    )
    environment: str = Field("development", validation_alias="BUDGETLAB_ENV")
    max_upload_bytes: int = Field(
        2 * 1024**3, validation_alias="BUDGETLAB_MAX_UPLOAD_BYTES",
        description="Uploads larger than this are refused with 413.",
    )
    extra_models: str = Field(
        "", validation_alias="BUDGETLAB_MODELS",
        description="Comma-separated extra models offered for probing and training: hub ids with a pinned "
                    "revision (org/name@<commit or tag>), or checkpoint directories under the models directory.",
    )
    models_dir: Path | None = Field(
        None, validation_alias="BUDGETLAB_MODELS_DIR",
        description="Local checkpoints must lie here (checked after resolving links). Default: <data_dir>/models.",
    )
    probe_shard_size: int = Field(
        256, validation_alias="BUDGETLAB_PROBE_SHARD_SIZE", description="Prompts per probe shard."
    )
    worker_beat_seconds: float = Field(
        10, gt=0, validation_alias="BUDGETLAB_WORKER_BEAT_SECONDS",
        description="How often a worker process says it is alive; silent for 3 beats counts as gone.",
    )
    regrade_inline_samples: int = Field(
        20_000, ge=0, validation_alias="BUDGETLAB_REGRADE_INLINE_SAMPLES",
        description="Labels that re-grade at most this many stored samples do it within the import; "
                    "more, and a re-grading job with progress does it.",
    )
    label_studio_hosts: str = Field(
        "", validation_alias="BUDGETLAB_LABEL_STUDIO_HOSTS",
        description="Comma-separated host names a Label Studio URL may point at (empty: any). Limits where "
                    "the server connects on a token holder's say.",
    )
    lease_seconds: float = Field(
        300, gt=0, validation_alias="BUDGETLAB_LEASE_SECONDS",
        description="A running task's lease, renewed by its work loop after each batch or step; a task whose "
                    "lease expired has lost its worker, and the reconciler runs it again or fails the job.",
    )
    reconcile_seconds: float = Field(
        15, gt=0, validation_alias="BUDGETLAB_RECONCILE_SECONDS",
        description="How often the reconciler looks for lost, stuck and unsent work.",
    )
    resend_unclaimed_seconds: float = Field(
        300, gt=0, validation_alias="BUDGETLAB_RESEND_UNCLAIMED_SECONDS",
        description="A task sent this long ago that no worker claimed, while its queue is empty, was lost by "
                    "the broker: the reconciler sends it again.",
    )
    time_limit_floor_seconds: float = Field(
        900, gt=0, validation_alias="BUDGETLAB_TIME_LIMIT_FLOOR_SECONDS",
        description="Every task may run this long (model loading and start-up) on top of its sized work.",
    )
    slowest_tokens_per_second: float = Field(
        20, gt=0, validation_alias="BUDGETLAB_SLOWEST_TOKENS_PER_SECOND",
        description="Time limits are sized for a worker this slow: tokens to generate / this rate.",
    )

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> "Settings":
        if self.environment != "development" and self.admin_token in {"changeme", "change-me", "secret"}:
            raise ValueError("BUDGETLAB_ADMIN_TOKEN is a placeholder; set a real secret outside development")
        return self

    @model_validator(mode="after")
    def _pinned_hub_models(self) -> "Settings":
        for entry in filter(None, (m.strip() for m in self.extra_models.split(","))):
            if not Path(entry).is_absolute() and "@" not in entry:
                raise ValueError(f"BUDGETLAB_MODELS: the hub id {entry!r} needs a pinned revision, so every worker "
                                 f"loads the same weights: write {entry}@<commit sha or tag>")
        return self

    @property
    def local_models_dir(self) -> Path:
        return (self.models_dir or self.data_dir / "models").resolve()

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            url = self.database_url
            # Plain postgres URLs select psycopg 3 (the driver we install).
            for prefix in ("postgresql://", "postgres://"):
                if url.startswith(prefix):
                    return "postgresql+psycopg://" + url[len(prefix):]
            return url
        return f"sqlite:///{(self.data_dir / 'budgetlab.db').resolve()}"

    @property
    def celery_broker_url(self) -> str:
        if self.broker_url:
            return self.broker_url
        return f"sqla+sqlite:///{(self.data_dir / 'broker.db').resolve()}"

    @property
    def artifacts(self) -> Path:
        return (self.artifact_dir or self.data_dir / "artifacts").resolve()

    @property
    def is_sqlite(self) -> bool:
        return self.sqlalchemy_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    return Settings()

from tests.worker.model_fixtures import service_tiny_model, tiny_artifacts, use_artifacts  # noqa: F401

# The API: FastAPI + the frontend. No torch, transformers or vLLM in this image.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 BUDGETLAB_HOST=0.0.0.0
COPY pyproject.toml README.md alembic.ini ./
COPY backend backend
COPY worker worker
COPY frontend frontend
COPY migrations migrations
RUN pip install --no-cache-dir .
EXPOSE 8000
CMD ["budgetlab", "serve", "--no-worker"]

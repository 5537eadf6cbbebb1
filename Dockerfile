# yuxi in one image. With YUXI_DATABASE_URL set it uses that PostgreSQL; without it,
# the embedded PostgreSQL keeps its data under YUXI_HOME (mount a volume there).
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv \
    && useradd --create-home --uid 10001 yuxi

WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY yuxi ./yuxi
COPY sql ./sql
RUN uv sync --locked --no-dev \
    && mkdir -p /data && chown -R yuxi:yuxi /app /data

USER yuxi
ENV YUXI_HOME=/data \
    YUXI_HOST=0.0.0.0 \
    YUXI_PORT=8000 \
    PATH=/app/.venv/bin:$PATH
VOLUME ["/data"]
EXPOSE 8000

# tini reaps children and forwards SIGTERM, so `docker stop` is a graceful shutdown:
# the worker finishes or releases its runs and the embedded database stops cleanly.
ENTRYPOINT ["tini", "--"]
CMD ["yuxi", "up"]

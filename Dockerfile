# The server image: `svc-server serve`, configured by SVCSRV_* variables (docs/settings.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 SVCSRV_MODE=production \
    SVCSRV_BIND_HOST=0.0.0.0 SVCSRV_BIND_PORT=8000
WORKDIR /srv
COPY pyproject.toml README.md ./
COPY router router
COPY payments payments
COPY manifest manifest
COPY portal portal
COPY ops ops
COPY svc svc
COPY examples examples
RUN pip install --no-cache-dir . && useradd --system --uid 10001 svc
USER svc
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request,os; urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/healthz', headers={'Host': __import__('urllib.parse').parse.urlsplit(os.environ['SVCSRV_BASE_URL']).netloc}))"
CMD ["svc-server", "serve"]

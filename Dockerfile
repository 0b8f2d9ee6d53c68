# crosstalk worker / deliver / produce image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Metadata first, sources after: the dependency layer is reused while only code changes.
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY detectors ./detectors
COPY streams ./streams
RUN pip install ".[rocksdb]" && useradd --create-home --uid 10001 crosstalk \
    && mkdir -p /data /secrets && chown crosstalk /data /secrets

USER crosstalk
ENV CROSSTALK_KAFKA__DATA_DIR=/data \
    CROSSTALK_KAFKA__WEB_BIND=0.0.0.0
VOLUME ["/data"]
EXPOSE 6066
# For the worker (the default command), which serves /health on its web port; services of this image
# that serve no HTTP (deliver, produce) turn it off in docker-compose.yml.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import os,urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('CROSSTALK_KAFKA__WEB_PORT', '6066'), timeout=2)" || exit 1
ENTRYPOINT ["crosstalk"]
CMD ["worker"]

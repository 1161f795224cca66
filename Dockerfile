# crawler as a container: `docker build -t crawler .` then
#   docker run --rm crawler https://example.org/ --max-pages 50
# With a headless Chromium for --render auto|always (docs/render.md), a second tag:
#   docker build --build-arg RENDER=1 -t crawler:render .
# Results go to stdout, progress and the summary to stderr; the entry point is `crawler crawl`.

# -- build stage: build the project's wheel and the wheels of its dependencies --
FROM python:3.12-slim AS build
# gcc builds the optional compiled extractor; without a compiler the wheel is pure Python.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY crawler/ crawler/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .
# RENDER=1: Playwright's wheel too (the extra render); the browser is the runtime's chromium.
ARG RENDER=0
RUN if [ "$RENDER" = 1 ]; then pip wheel --no-cache-dir --wheel-dir /wheels ".[render]"; fi

# -- runtime stage: the wheels installed offline, no compiler, a non-root user --
FROM python:3.12-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
ARG RENDER=0
# RENDER=1: Debian's Chromium, which Playwright drives through executable_path, and the
# libatomic the Node.js inside Playwright's wheel (its driver) links against.
# hadolint ignore=DL3008
RUN if [ "$RENDER" = 1 ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends chromium libatomic1 \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels /wheels/crawler-*.whl \
 && if [ "$RENDER" = 1 ]; then \
      pip install --no-cache-dir --no-index --find-links /wheels /wheels/playwright-*.whl; \
    fi \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 --shell /usr/sbin/nologin crawler
USER 10001
WORKDIR /home/crawler
ENTRYPOINT ["crawler", "crawl"]
CMD ["--help"]

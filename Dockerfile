# One image for every koordinator-py component: koord-scheduler, koord-manager, koord-descheduler, koordlet, koordctl.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY apis apis
COPY scheduler scheduler
COPY operators operators
COPY koordlet koordlet
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
USER 65532:65532
ENTRYPOINT []
CMD ["koord-scheduler", "--help"]

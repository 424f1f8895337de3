# syntax=docker/dockerfile:1
# Airlock's image. Build: docker build -t airlock .
# Run (see docs/deploy.md, "Docker"):
#   docker run -d --name airlock -p 8080:8080 -v airlock-data:/var/lib/airlock \
#     -v $PWD/airlock.yaml:/etc/airlock/airlock.yaml:ro -e GEMINI_API_KEY airlock
# deploy/docker_test.go checks the paths, port, user and health check below
# against docs/deploy.md and the config's defaults.

# Build: cgo is on for SQLite (github.com/mattn/go-sqlite3); the Go image has
# gcc. The module and build caches persist between builds (BuildKit).
FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=1 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/airlock ./cmd/airlock

# Run: a small Debian with the C library SQLite needs, as a non-root user
# (uid and gid 10001). /var/lib/airlock is the working directory and a
# volume, so the default SQLite path (storage.dsn "airlock.db", relative)
# is /var/lib/airlock/airlock.db and survives the container. A new named
# volume takes the directory's owner (10001); a host directory mounted there
# must be writable by uid 10001.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 airlock \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/airlock --no-create-home --shell /usr/sbin/nologin airlock \
    && mkdir -p /var/lib/airlock /etc/airlock \
    && chown 10001:10001 /var/lib/airlock \
    && chmod 0750 /var/lib/airlock
# Only the binary: config.example.yaml and its fake tools script
# (examples/service.sh) are for `airlock chat` in a checkout, not the image.
COPY --from=build /out/airlock /usr/local/bin/airlock
USER 10001:10001
WORKDIR /var/lib/airlock
VOLUME /var/lib/airlock
# `listen` (default ":8080"): GET /healthz, GET /readyz, POST /slack/events.
EXPOSE 8080
# The slim image has no curl: the binary checks itself. A config that moves
# `listen` off port 8080 needs its own --health-cmd.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/airlock", "health", "-url", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/airlock"]
CMD ["run", "-config", "/etc/airlock/airlock.yaml"]

# syntax=docker/dockerfile:1
# Build: cgo is on for SQLite (github.com/mattn/go-sqlite3).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/airlock ./cmd/airlock

# Run: a small Debian with the C library SQLite needs, as a non-root user.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/airlock --create-home airlock
COPY --from=build /out/airlock /usr/local/bin/airlock
USER airlock
WORKDIR /var/lib/airlock
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/airlock"]
CMD ["run", "-config", "/etc/airlock/airlock.yaml"]

#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 on 127.0.0.1 for the tests and prints the
# DSN to use as AIRLOCK_TEST_POSTGRES_DSN. postgres refuses to run as root, so
# the server runs as the postgres user. Usage: eval "$(.ci/postgres.sh)"
set -euo pipefail
port="${PGPORT_TEST:-55432}"
# Take the next free port if that one is in use.
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ]; then
  if command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  else
    echo "postgres.sh: no PostgreSQL binaries found" >&2; exit 1
  fi
fi
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }
data=$(mktemp -d /tmp/airlock-pg.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres "$data"
run "$bindir/initdb -D $data -U postgres -A trust --no-sync >/dev/null"
# A port can be unbindable though nothing answers on it (a connection in
# TIME_WAIT that used it as its local port): then try the next ones.
for try in 1 2 3 4 5 6 7 8; do
  if run "$bindir/pg_ctl -D $data -o '-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200' -l $data/log -w start >/dev/null"; then
    break
  fi
  [ "$try" = 8 ] && { echo "postgres.sh: could not start PostgreSQL (see $data/log)" >&2; exit 1; }
  port=$((port + 1))
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
done
run "$bindir/createdb -h 127.0.0.1 -p $port -U postgres airlock_test"
echo "export AIRLOCK_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:$port/airlock_test?sslmode=disable'"
echo "export AIRLOCK_TEST_PGDATA='$data'"

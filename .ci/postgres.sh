#!/usr/bin/env bash
# Starts or stops the PostgreSQL server the keel-store-postgres tests use.
#
#   bash .ci/postgres.sh start   # installs PostgreSQL from Debian packages if missing, initdb's a
#                                # cluster in a temp directory, starts it on 127.0.0.1:$PGPORT
#                                # and creates the test database
#   bash .ci/postgres.sh stop    # stops the server and removes its directory
#   bash .ci/postgres.sh url     # prints the connection string the tests read
#
# The tests read the connection string from KEEL_TEST_POSTGRES and fail (never skip) when
# KEEL_REQUIRE_POSTGRES=1 is set and the server is unreachable:
#   export KEEL_TEST_POSTGRES="$(bash .ci/postgres.sh url)" KEEL_REQUIRE_POSTGRES=1
set -euo pipefail

PORT="${KEEL_PG_PORT:-54329}"
DIR="${KEEL_PG_DIR:-${TMPDIR:-/tmp}/keel-ci-postgres}"
DB=keel_test
USER_NAME=keel

# The server refuses to run as root: as root, run it as the `postgres` account.
as_server_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# pg_ctl and initdb live outside PATH on Debian (/usr/lib/postgresql/<major>/bin).
find_bin() {
  local name=$1 found
  if found=$(command -v "$name" 2>/dev/null); then echo "$found"; return 0; fi
  found=$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$found" ] && { echo "$found"; return 0; }
  return 1
}

install_if_missing() {
  if find_bin pg_ctl >/dev/null && find_bin initdb >/dev/null; then return 0; fi
  echo "postgres.sh: installing PostgreSQL from Debian packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q postgresql
}

start() {
  install_if_missing
  local pg_ctl initdb
  pg_ctl=$(find_bin pg_ctl)
  initdb=$(find_bin initdb)
  if [ -f "$DIR/data/postmaster.pid" ] && as_server_user "$pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
    echo "postgres.sh: already running on 127.0.0.1:$PORT" >&2
    return 0
  fi
  rm -rf "$DIR"
  mkdir -p "$DIR"
  if [ "$(id -u)" = 0 ]; then
    # The Debian package creates the `postgres` account; binaries installed otherwise may not.
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres: "$DIR"
  fi
  # Trust auth on loopback only: a throwaway test cluster.
  as_server_user "$initdb" -D "$DIR/data" -U "$USER_NAME" -A trust -E UTF8 --no-locale >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
  # fsync stays on: the committer's durability is what the tests exercise.
  as_server_user "$pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c max_connections=200" start >/dev/null \
    || { cat "$DIR/server.log" >&2; exit 1; }
  psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -q -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE $DB" >/dev/null
  echo "postgres.sh: PostgreSQL on 127.0.0.1:$PORT, database $DB ($(url))" >&2
}

stop() {
  local pg_ctl
  if pg_ctl=$(find_bin pg_ctl) && [ -d "$DIR/data" ]; then
    as_server_user "$pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$DIR"
}

url() {
  echo "host=127.0.0.1 port=$PORT user=$USER_NAME dbname=$DB"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Arize Phoenix, a real OpenTelemetry trace store that receives OTLP/HTTP, for keel-otel's
# tests/phoenix.rs. Installed from PyPI into a virtualenv with every package pinned
# (.ci/phoenix/requirements.txt, installed with --no-deps so pip resolves nothing).
#
#   bash .ci/phoenix.sh start   # install if missing, start on 127.0.0.1:$PORT, wait until healthy
#   bash .ci/phoenix.sh stop    # stop it and remove its data directory
#   bash .ci/phoenix.sh url     # the base URL the test reads from KEEL_PHOENIX_URL
#
#   export KEEL_PHOENIX_URL="$(bash .ci/phoenix.sh url)" KEEL_REQUIRE_PHOENIX=1
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${KEEL_PHOENIX_PORT:-16006}"
GRPC_PORT="${KEEL_PHOENIX_GRPC_PORT:-14317}"
VENV="${KEEL_PHOENIX_VENV:-$PWD/target/phoenix-venv}"
DATA="${KEEL_PHOENIX_DIR:-${TMPDIR:-/tmp}/keel-ci-phoenix}"
URL="http://127.0.0.1:$PORT"

install_if_missing() {
  if [ -x "$VENV/bin/phoenix" ]; then return 0; fi
  echo "phoenix.sh: installing arize-phoenix (pinned) into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r .ci/phoenix/requirements.txt >&2
  [ -x "$VENV/bin/phoenix" ] || { echo "phoenix.sh: the install did not provide bin/phoenix" >&2; exit 1; }
}

healthy() { curl -sf -o /dev/null "$URL/healthz"; }

case "${1:-}" in
  start)
    install_if_missing
    if healthy; then echo "phoenix.sh: already running at $URL" >&2; exit 0; fi
    rm -rf "$DATA"; mkdir -p "$DATA"
    PHOENIX_WORKING_DIR="$DATA" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$PORT" PHOENIX_GRPC_PORT="$GRPC_PORT" \
      PHOENIX_TELEMETRY_ENABLED=false nohup "$VENV/bin/phoenix" serve > "$DATA/server.log" 2>&1 &
    echo $! > "$DATA/pid"
    # Its first start migrates its database: slow on a loaded 2-core machine.
    for _ in $(seq 1 300); do
      if healthy; then echo "phoenix.sh: Phoenix is up at $URL" >&2; exit 0; fi
      if ! kill -0 "$(cat "$DATA/pid")" 2>/dev/null; then
        echo "phoenix.sh: Phoenix exited while starting; its log:" >&2; tail -n 40 "$DATA/server.log" >&2; exit 1
      fi
      sleep 1
    done
    echo "phoenix.sh: Phoenix did not answer $URL/healthz within 300 s; its log:" >&2
    tail -n 40 "$DATA/server.log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$DATA/pid" ]; then kill "$(cat "$DATA/pid")" 2>/dev/null || true; fi
    # Also a server whose pid file is gone (a start interrupted before writing it).
    pkill -f "$VENV/bin/phoenix serve" 2>/dev/null || true
    rm -rf "$DATA"
    ;;
  url) echo "$URL" ;;
  *) echo "usage: bash .ci/phoenix.sh start|stop|url" >&2; exit 2 ;;
esac

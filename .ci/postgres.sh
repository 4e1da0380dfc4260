#!/usr/bin/env bash
# Start a throwaway PostgreSQL on loopback for the test suite and print its URL.
# Installs Debian's postgresql when it is missing. Usage: eval "$(.ci/postgres.sh)"
set -euo pipefail
# Below Linux's ephemeral range (32768-60999): a port there can be taken at any moment by
# some other test's outgoing or port-0 socket, and was, once.
PORT="${SEXTANT_PG_PORT:-25432}"
DIR="${SEXTANT_PG_DIR:-/tmp/sextant-pg}"
bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(bin_dir)" ]; then
  echo "installing postgresql from Debian's packages" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
fi
BIN="$(bin_dir)"
RUN_AS=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  RUN_AS=(runuser -u postgres --)
fi
if ! "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
  rm -rf "$DIR"; mkdir -p "$DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$DIR"
  "${RUN_AS[@]}" "$BIN/initdb" -D "$DIR" -A trust -U sextant >/dev/null
  if ! "${RUN_AS[@]}" "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w \
    -o "-h 127.0.0.1 -p $PORT -k $DIR -F -c fsync=off -c full_page_writes=off -c max_connections=200" start >/dev/null; then
    echo "PostgreSQL did not start on port $PORT (set SEXTANT_PG_PORT to use another):" >&2
    tail -n 5 "$DIR/server.log" >&2
    exit 1
  fi
  "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U sextant sextant_test
fi
echo "export SEXTANT_TEST_PG_URL=postgresql+psycopg://sextant@127.0.0.1:$PORT/sextant_test"

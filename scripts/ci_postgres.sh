#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the storage tests and print the URL to use.
#
#     eval "$(bash scripts/ci_postgres.sh)"      # then: make test
#
# Installs Debian's postgresql with apt-get if no server binaries are found (needs root), creates
# a fresh cluster in a temporary directory (owned by the postgres user when run as root: the
# server refuses to run as root), listening on 127.0.0.1 only, on a free port, with a random
# password, and creates the database "memorybank_test". Only the `export` lines go to stdout;
# everything else goes to stderr. Stop it with the `pg_ctl ... stop` command printed on stderr
# (or leave it: the machine is throwaway).
set -euo pipefail

log() { printf 'ci_postgres: %s\n' "$*" >&2; }

find_bindir() {
  local d
  # Highest installed major version first.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

if ! BINDIR=$(find_bindir); then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "no PostgreSQL server found; install Debian's 'postgresql' package (as root: apt-get install postgresql)"
    exit 1
  fi
  log "installing Debian's postgresql"
  # Do not create and start the default cluster: we make our own below.
  mkdir -p /etc/postgresql-common
  if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
  BINDIR=$(find_bindir) || { log "postgresql installed but initdb not found"; exit 1; }
fi

if [[ $(id -u) -eq 0 ]]; then
  RUN_AS=(runuser -u postgres --)
  id postgres >/dev/null 2>&1 || { log "user 'postgres' missing (it comes with Debian's postgresql package)"; exit 1; }
else
  RUN_AS=()
fi

PORT=$(python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
)
PASSWORD=$(python3 -c "import secrets; print(secrets.token_hex(16))")
TOP=$(mktemp -d "${TMPDIR:-/tmp}/memorybank-pg.XXXXXX")
DATA="$TOP/data"
mkdir -p "$DATA"
printf '%s\n' "$PASSWORD" >"$TOP/pwfile"
chmod 700 "$TOP"
chmod 600 "$TOP/pwfile"
if [[ $(id -u) -eq 0 ]]; then
  chown -R postgres:postgres "$TOP"
fi

log "initialising a cluster in $DATA (PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}'))"
"${RUN_AS[@]}" "$BINDIR/initdb" -D "$DATA" -U postgres --pwfile="$TOP/pwfile" \
  --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$TOP/initdb.log" 2>&1 \
  || { cat "$TOP/initdb.log" >&2; exit 1; }
rm -f "$TOP/pwfile"

"${RUN_AS[@]}" "$BINDIR/pg_ctl" -D "$DATA" -l "$TOP/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $TOP -c max_connections=300" start >&2 \
  || { cat "$TOP/server.log" >&2; exit 1; }

PGPASSWORD="$PASSWORD" "$BINDIR/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -q -v ON_ERROR_STOP=1 \
  -c "CREATE DATABASE memorybank_test" >&2

log "server on 127.0.0.1:$PORT, data in $DATA, log in $TOP/server.log"
log "stop it with: ${RUN_AS[*]} $BINDIR/pg_ctl -D $DATA stop"
echo "export MEMORYBANK_TEST_PG_URL=postgresql://postgres:$PASSWORD@127.0.0.1:$PORT/memorybank_test"
echo "export MEMORYBANK_TEST_PG_DIR=$TOP"

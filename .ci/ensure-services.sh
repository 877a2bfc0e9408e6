#!/usr/bin/env bash
# Makes sure the services the test suite talks to are up: PostgreSQL at DATABASE_URL and NATS (with
# JetStream) at NATS_URL, by default 127.0.0.1:5432 and 127.0.0.1:4222. A server of a URL you set is
# only checked (it must answer); the local defaults are started if they are installed but down and
# installed (Debian packages) only if PostgreSQL is missing altogether. Also installs Debian
# `chromium` for the browser tests when it is missing (best effort). Runs as root, without a terminal.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
WAIT_SECONDS=60

log() { echo "[ensure-services] $*" >&2; }

answers() { # host port
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

apt_updated=false
apt_install() {
  if [ "$apt_updated" = false ]; then
    apt-get update -qq
    apt_updated=true
  fi
  apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "$@"
}

host_port() { # url default-port -> "host port" (first server of a comma-separated list)
  local rest="${1#*://}"
  rest="${rest%%,*}"
  rest="${rest%%/*}"
  rest="${rest%%\?*}"
  rest="${rest##*@}"
  local host="$rest" port="$2"
  if [[ "$rest" =~ ^\[(.*)\](:([0-9]+))?$ ]]; then
    host="${BASH_REMATCH[1]}"
    port="${BASH_REMATCH[3]:-$2}"
  elif [[ "$rest" == *:* ]]; then
    host="${rest%:*}"
    port="${rest##*:}"
  fi
  echo "${host:-127.0.0.1} $port"
}

# A URL the caller set names a server this script does not own: it must answer, nothing is started.
check_given() { # name url default-port
  local hp
  read -r -a hp <<<"$(host_port "$2" "$3")"
  if ! answers "${hp[0]}" "${hp[1]}"; then
    log "$1 does not answer at ${hp[0]}:${hp[1]} (from the URL you set)"
    exit 1
  fi
  log "$1 (${hp[0]}:${hp[1]}, from the URL you set) answers"
}
need_pg=true
need_nats=true
if [ -n "${DATABASE_URL:-}" ]; then
  check_given PostgreSQL "$DATABASE_URL" 5432
  need_pg=false
fi
if [ -n "${NATS_URL:-}" ]; then
  check_given NATS "$NATS_URL" 4222
  need_nats=false
fi
local_pg_up() { [ "$need_pg" = false ] || answers 127.0.0.1 5432; }
local_nats_up() { [ "$need_nats" = false ] || answers 127.0.0.1 4222; }

pg_version() { # newest installed cluster version, e.g. 15
  ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1
}

if ! local_pg_up || ! local_nats_up; then
  if [ -z "$(pg_version)" ] || ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "PostgreSQL is not installed: installing postgresql and nats-server"
    apt_install postgresql nats-server
    version="$(pg_version)"
    # The suite connects as postgres without a password (postgres://postgres@127.0.0.1:5432/postgres).
    hba="/etc/postgresql/$version/main/pg_hba.conf"
    if [ -f "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
      log "allowing password-less local connections in $hba"
      printf '%s\n' 'local all all trust' 'host all all 127.0.0.1/32 trust' 'host all all ::1/128 trust' |
        cat - "$hba" >"$hba.new"
      mv "$hba.new" "$hba"
      chown postgres:postgres "$hba"
      pg_ctlcluster --skip-systemctl-redirect "$version" main reload 2>/dev/null || true
    fi
  elif [ ! -x /usr/sbin/nats-server ]; then
    log "nats-server is not installed: installing it"
    apt_install nats-server
  fi

  if ! local_pg_up; then
    log "starting PostgreSQL $(pg_version)"
    pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start || true
  fi
  if ! local_nats_up; then
    log "starting nats-server"
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  fi

  deadline=$((SECONDS + WAIT_SECONDS))
  until local_pg_up && local_nats_up; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      local_pg_up || log "PostgreSQL does not answer on 127.0.0.1:5432 after ${WAIT_SECONDS} s"
      local_nats_up || log "NATS does not answer on 127.0.0.1:4222 after ${WAIT_SECONDS} s"
      exit 1
    fi
    sleep 1
  done
fi
if [ "$need_pg" = true ]; then log "PostgreSQL (127.0.0.1:5432) answers"; fi
if [ "$need_nats" = true ]; then log "NATS (127.0.0.1:4222) answers"; fi

if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium for the browser tests"
  if ! apt_install chromium; then
    log "warning: could not install chromium; browser tests may be skipped or fail"
  fi
fi

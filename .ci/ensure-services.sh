#!/usr/bin/env bash
# Makes sure the services the test suite talks to are up: PostgreSQL on 127.0.0.1:5432 and NATS
# (with JetStream) on 127.0.0.1:4222. Starts them if they are installed but down; installs them
# (Debian packages) only if PostgreSQL is missing altogether. Also installs Debian `chromium` for
# the browser tests when it is missing (best effort). Runs as root, without a terminal.
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

pg_version() { # newest installed cluster version, e.g. 15
  ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1
}

if ! answers 127.0.0.1 5432 || ! answers 127.0.0.1 4222; then
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

  if ! answers 127.0.0.1 5432; then
    log "starting PostgreSQL $(pg_version)"
    pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start || true
  fi
  if ! answers 127.0.0.1 4222; then
    log "starting nats-server"
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  fi

  deadline=$((SECONDS + WAIT_SECONDS))
  until answers 127.0.0.1 5432 && answers 127.0.0.1 4222; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      answers 127.0.0.1 5432 || log "PostgreSQL does not answer on 127.0.0.1:5432 after ${WAIT_SECONDS} s"
      answers 127.0.0.1 4222 || log "NATS does not answer on 127.0.0.1:4222 after ${WAIT_SECONDS} s"
      exit 1
    fi
    sleep 1
  done
fi
log "PostgreSQL (127.0.0.1:5432) and NATS (127.0.0.1:4222) answer"

if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium for the browser tests"
  if ! apt_install chromium; then
    log "warning: could not install chromium; browser tests may be skipped or fail"
  fi
fi

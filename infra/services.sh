#!/usr/bin/env bash
# Local orchestration services, all on 127.0.0.1, state in .services/ (git-ignored):
#   Prefect server (SQLite in .services/prefect), a `process` work pool + worker,
#   MLflow server (SQLite + artifacts in .services/mlflow, --workers 1, no job runner).
#
#   infra/services.sh start            start all three (idempotent), create the pool
#   infra/services.sh deploy           register prefect.yaml's deployments
#   infra/services.sh stop             stop all (SIGINT for Prefect, by their own PIDs)
#   infra/services.sh status           what runs, and where
#   eval "$(infra/services.sh env)"    point this shell's prefect/mlflow/dvc at them
#
# Knobs (environment): ERIC_PREFECT_PORT (4200), ERIC_MLFLOW_PORT (5000),
# ERIC_SERVICES_DIR (.services), ERIC_WORK_POOL (eric-process), ERIC_PYTHON
# (.venv/bin/python), ERIC_START_TIMEOUT (180 s).
set -euo pipefail

ROOT=${ERIC_PROJECT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
STATE=${ERIC_SERVICES_DIR:-$ROOT/.services}
PY=${ERIC_PYTHON:-$ROOT/.venv/bin/python}
PREFECT_PORT=${ERIC_PREFECT_PORT:-4200}
MLFLOW_PORT=${ERIC_MLFLOW_PORT:-5000}
POOL=${ERIC_WORK_POOL:-eric-process}
TIMEOUT=${ERIC_START_TIMEOUT:-180}
PREFECT_URL=http://127.0.0.1:$PREFECT_PORT/api
MLFLOW_URL=http://127.0.0.1:$MLFLOW_PORT

[ -x "$PY" ] || { echo "services: no python at $PY (run infra/setup.sh, or set ERIC_PYTHON)" >&2; exit 2; }

# Everything below (servers, worker, the flow runs it starts, dvc, stages) sees these.
export PATH="$(dirname "$PY"):$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's `eric`, whatever is installed
export PREFECT_HOME=$STATE/prefect PREFECT_API_URL=$PREFECT_URL
eval "$("$PY" -c 'from eric.env import shell_exports; print(shell_exports())')"  # offline hub, telemetry off: eric/env.py's DEFAULTS
export PREFECT_WORKER_QUERY_SECONDS=${PREFECT_WORKER_QUERY_SECONDS:-5}
# `prefect deployment run --watch` streams the run's logs (the stages' progress) only with these on
export PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED=true PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED=true
export MLFLOW_TRACKING_URI=$MLFLOW_URL MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false

pidfile() { echo "$STATE/$1.pid"; }

# A pid file whose process still runs the program we started (not a reused pid).
running() {
  local f pid; f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  if [ -r "/proc/$pid/cmdline" ]; then tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2"
  else ps -o args= -p "$pid" 2>/dev/null | grep -q "$2"; fi
}

# Start a program in its own session, so that stopping it reaches its children.
launch() {
  local name=$1; shift
  mkdir -p "$STATE/logs"
  echo "--- $(date -u +%FT%TZ) $name start" >>"$STATE/logs/$name.log"  # appended: a restart keeps the history
  (cd "$ROOT" && exec setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null) &
  echo $! >"$(pidfile "$name")"
}

wait_http() {
  local name=$1 url=$2 waited=0
  while true; do  # ours must still run when the URL answers (a server that lost its port exits)
    if ! running "$name" "$3"; then
      echo "services: $name exited; last lines of $STATE/logs/$name.log:" >&2
      tail -n 5 "$STATE/logs/$name.log" >&2; return 1
    fi
    "$PY" -c "import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$url" 2>/dev/null && break
    [ "$waited" -ge "$TIMEOUT" ] && { echo "services: $name not healthy after ${TIMEOUT}s ($url)" >&2; return 1; }
    sleep 1; waited=$((waited + 1))
  done
  echo "$name ready after ${waited}s: $url"
}

# A port someone else holds would answer our health check with their server: refuse it.
port_free() {
  "$PY" -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.close()" "$1" 2>/dev/null && return
  echo "services: port $1 is in use on 127.0.0.1 (set $2 to another port)" >&2; return 1
}

# Launch both servers first, then wait: their start-ups overlap.
launch_mlflow() {
  running mlflow mlflow && return
  port_free "$MLFLOW_PORT" ERIC_MLFLOW_PORT || return 3
  mkdir -p "$STATE/mlflow/artifacts"
  launch mlflow "$PY" -m mlflow server --host 127.0.0.1 --port "$MLFLOW_PORT" --workers 1 \
    --backend-store-uri "sqlite:///$STATE/mlflow/mlflow.db" --artifacts-destination "$STATE/mlflow/artifacts"
}

launch_prefect() {
  running prefect-server prefect && return
  port_free "$PREFECT_PORT" ERIC_PREFECT_PORT || return 3
  mkdir -p "$PREFECT_HOME"
  launch prefect-server "$PY" -m prefect server start --host 127.0.0.1 --port "$PREFECT_PORT"
}

start_servers() {
  launch_mlflow || return
  launch_prefect || return
  wait_http mlflow "$MLFLOW_URL/health" mlflow
  wait_http prefect-server "$PREFECT_URL/health" prefect
  "$PY" -m prefect work-pool create "$POOL" --type process --overwrite >/dev/null
  echo "work pool $POOL (process) ready"
}

start_worker() {
  running prefect-worker prefect && { echo "worker already running on pool $POOL"; return; }
  launch prefect-worker "$PY" -m prefect worker start --pool "$POOL" --type process --limit 1 --name "eric-worker"
  sleep 2
  running prefect-worker prefect || { tail -n 5 "$STATE/logs/prefect-worker.log" >&2; return 1; }
  echo "worker started on pool $POOL (log: $STATE/logs/prefect-worker.log)"
}

# SIGINT for Prefect (SIGTERM can hang it), SIGTERM for MLflow; SIGKILL after 30 s.
stop_one() {
  local name=$1 match=$2 sig=$3 f pid
  f=$(pidfile "$name")
  if ! running "$name" "$match"; then rm -f "$f"; echo "$name: not running"; return; fi
  pid=$(cat "$f")
  kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name: still running after $sig, killing its process group" >&2
    kill -s KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"; echo "$name: stopped"
}

deploy() {
  (cd "$ROOT" && "$PY" -m prefect --no-prompt deploy --all)
}

status() {
  local name match
  for pair in mlflow:mlflow prefect-server:prefect prefect-worker:prefect; do
    name=${pair%%:*} match=${pair#*:}
    if running "$name" "$match"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; fi
  done
  echo "Prefect UI: http://127.0.0.1:$PREFECT_PORT   MLflow UI: $MLFLOW_URL"
}

env_lines() {
  cat <<EOF
export PREFECT_HOME='$PREFECT_HOME' PREFECT_API_URL='$PREFECT_URL' MLFLOW_TRACKING_URI='$MLFLOW_URL'
$("$PY" -c 'from eric.env import shell_exports; print(shell_exports())')
EOF
}

case "${1:-}" in
  start) start_servers; start_worker; status ;;
  stop) stop_one prefect-worker prefect INT; stop_one prefect-server prefect INT; stop_one mlflow mlflow TERM ;;
  status) status ;;
  deploy) deploy ;;
  env) env_lines ;;
  *) echo "usage: infra/services.sh start|deploy|stop|status|env" >&2; exit 2 ;;
esac

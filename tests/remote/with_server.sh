#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs a command against a kiln-server started for it (tests/remote/CMakeLists.txt):
#   with_server.sh SERVER DEVICE COMMAND ARGS...
# The server serves DEVICE on 127.0.0.1 at a port the system chooses, with a fresh token in
# KILN_REMOTE_TOKEN; "@URL@" in the arguments and in KILN_TEST_DEVICES / KILN_DEVICE becomes its
# ws://127.0.0.1:PORT. The server is stopped when the command ends; the command's status is returned.
set -uo pipefail
server=$1
device=$2
shift 2
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
"$server" --device "$device" --listen 127.0.0.1:0 --token-file "$work/token" --quiet >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 200); do
  grep -q listening "$work/out" 2>/dev/null && break
  sleep 0.05
done
port=$(sed -n 's/.*listening on ws:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/out")
if [ -z "$port" ]; then
  echo "with_server.sh: kiln-server did not start:" >&2
  cat "$work/err" >&2
  exit 1
fi
url="ws://127.0.0.1:$port"
echo "with_server.sh: kiln-server ($device) at $url"
KILN_REMOTE_TOKEN=$(cat "$work/token")
export KILN_REMOTE_TOKEN
[ -n "${KILN_TEST_DEVICES:-}" ] && export KILN_TEST_DEVICES="${KILN_TEST_DEVICES//@URL@/$url}"
[ -n "${KILN_DEVICE:-}" ] && export KILN_DEVICE="${KILN_DEVICE//@URL@/$url}"
args=()
for a in "$@"; do args+=("${a//@URL@/$url}"); done
"${args[@]}"
rc=$?
kill -0 "$pid" 2>/dev/null || { echo "with_server.sh: kiln-server died:" >&2; cat "$work/err" >&2; rc=1; }
exit $rc

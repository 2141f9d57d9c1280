#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# A failing rank must not hang the job (CTest dist_fault_*, tests/dist/CMakeLists.txt):
#   run_fault.sh <hang|kill|exit> <kiln_dist_fault> <mpirun> [mpirun flags...]
# runs 2 ranks of fault.cpp with a 3 s collective timeout and checks that the job ends with an
# error status well within a bound, and (hang, exit) that rank 0 reported the kiln::Error.
set -uo pipefail
mode=$1 bin=$2
shift 2
start=$(date +%s)
out=$(KILN_DIST_TIMEOUT=3 timeout 60 "$@" -np 2 "$bin" "$mode" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
echo "$out" | tail -30
echo "run_fault.sh: mode $mode, exit status $rc after $elapsed s"
fail() {
  echo "run_fault.sh: FAILED: $*"
  exit 1
}
[ $rc -eq 124 ] && fail "the job hung (killed by timeout after 60 s)"
[ $rc -eq 0 ] && fail "the job succeeded although rank 1 failed"
[ $elapsed -le 40 ] || fail "the job took $elapsed s"
case $mode in
  hang | exit)
    grep -q "rank 0 caught kiln::Error" <<<"$out" || fail "rank 0 did not report a kiln::Error"
    grep -q "did not complete within 3 s" <<<"$out" || fail "the error does not name the timeout"
    ;;
esac
echo "run_fault.sh: passed"

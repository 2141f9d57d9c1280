#!/usr/bin/env bash
# Runs a ctest preset (-j2). Tests that fail run once more, alone, with their output printed last
# so that a log's tail shows why. A test that passes on that second run is reported as flaky
# (its first run's output is kept in build/<preset>/flaky-tests.log) and does not fail the run;
# a test that fails twice does.
set -u
preset=${1:?usage: ctest-retry.sh PRESET}
dir=build/$preset
ctest --preset "$preset" -j2 && exit 0
failed=$dir/Testing/Temporary/LastTestsFailed.log
[ -s "$failed" ] || exit 1
cp "$dir/Testing/Temporary/LastTest.log" "$dir/flaky-tests.log" 2>/dev/null
names=$(cut -d: -f2- "$failed" | tr '\n' ' ')
if ctest --preset "$preset" --rerun-failed 2>&1 | tail -200; [ "${PIPESTATUS[0]}" -eq 0 ]; then
  echo "FLAKY (failed once, passed when rerun alone): $names"
  echo "their first output: $dir/flaky-tests.log"
  exit 0
fi
exit 1

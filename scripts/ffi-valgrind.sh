#!/usr/bin/env bash
# Runs every C test program under valgrind memcheck: any memory error or definite leak fails.
# The concurrency program runs a reduced number of iterations (valgrind is ~50x slower).
# Usage: scripts/ffi-valgrind.sh
source "$(dirname "$0")/ffi-common.sh"
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
libdir="$(build_lib debug)"
out="$TARGET_DIR/kvexact-valgrind"
for p in "${C_PROGRAMS[@]}"; do
  compile_c "$p" "$out" "$libdir" -O0
  echo "== valgrind $p"
  KVEXACT_TEST_ITERATIONS="${KVEXACT_TEST_ITERATIONS:-2000}" KVEXACT_TEST_GENERATIONS="${KVEXACT_TEST_GENERATIONS:-1}" \
    valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite "$out/$p" "$ROOT"
done
echo "valgrind: ${#C_PROGRAMS[@]} programs clean"

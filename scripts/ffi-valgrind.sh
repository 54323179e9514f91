#!/usr/bin/env bash
# Runs every C test program under valgrind memcheck: any memory error or definite leak fails.
# valgrind is ~50x slower and serialises threads: the concurrency program runs 2,000 calls on
# hashers only (KVEXACT_TEST_REGISTRY=0; its registry-publishing variant is covered by ASan),
# and gateway_flow (two registry loads, tokenizers of 7 and 11 MB) takes several minutes;
# hostile runs only its event-decoder case (9 MB instead of 62 MB), without its RSS checks (RSS
# under valgrind is not the program's; its encoder cases run under ASan and in cargo test).
# Usage: scripts/ffi-valgrind.sh
source "$(dirname "$0")/ffi-common.sh"
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
libdir="$(build_lib debug)"
out="$TARGET_DIR/kvexact-valgrind"
for p in "${C_PROGRAMS[@]}"; do
  compile_c "$p" "$out" "$libdir" -O0
  echo "== valgrind $p"
  KVEXACT_TEST_ITERATIONS="${KVEXACT_TEST_ITERATIONS:-2000}" KVEXACT_TEST_REGISTRY="${KVEXACT_TEST_REGISTRY:-0}" \
    KVEXACT_TEST_BIG_MB=9 KVEXACT_TEST_RSS=0 \
    valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite "$out/$p" "$ROOT"
done
echo "valgrind: ${#C_PROGRAMS[@]} programs clean"

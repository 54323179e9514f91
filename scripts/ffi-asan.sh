#!/usr/bin/env bash
# Runs every C test program built with AddressSanitizer (and UBSan) against the static
# libkvexact: any memory error, undefined behaviour in the C side, or leak fails.
# Usage: scripts/ffi-asan.sh
source "$(dirname "$0")/ffi-common.sh"
libdir="$(build_lib debug)"
out="$TARGET_DIR/kvexact-asan"
for p in "${C_PROGRAMS[@]}"; do
  compile_c "$p" "$out" "$libdir" -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=all
  echo "== asan $p"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1" \
    UBSAN_OPTIONS="print_stacktrace=1" \
    KVEXACT_TEST_ITERATIONS="${KVEXACT_TEST_ITERATIONS:-20000}" KVEXACT_TEST_RSS=0 \
    "$out/$p" "$ROOT"
done
echo "asan: ${#C_PROGRAMS[@]} programs clean"

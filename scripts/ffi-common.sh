# Sourced by the scripts/ffi-*.sh helpers: repository root, target dir, C program list, and a
# function that builds libkvexact and compiles the C test programs against it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CC="${CC:-cc}"
# The C test programs (each has a main and takes the repository root as argv[1]).
C_PROGRAMS=()
for f in "$ROOT"/ffi/tests/c/*.c; do C_PROGRAMS+=("$(basename "$f" .c)"); done

# build_lib PROFILE: cargo build of libkvexact (PROFILE = debug | release); prints the lib dir.
# With KVEXACT_LIB_DIR set (CI sets it to the library `cargo test --workspace` just built and
# tested), nothing is built: that directory is used as is.
build_lib() {
  local profile="$1"
  if [ -n "${KVEXACT_LIB_DIR:-}" ]; then
    if [ ! -f "$KVEXACT_LIB_DIR/libkvexact.a" ] || [ ! -f "$KVEXACT_LIB_DIR/libkvexact.so" ]; then
      echo "KVEXACT_LIB_DIR=$KVEXACT_LIB_DIR holds no libkvexact.a and libkvexact.so" >&2
      return 1
    fi
    echo "$KVEXACT_LIB_DIR"
    return
  fi
  if [ "$profile" = release ]; then
    (cd "$ROOT" && cargo build --release -p kvexact-ffi >&2)
  else
    (cd "$ROOT" && cargo build -p kvexact-ffi >&2)
  fi
  echo "$TARGET_DIR/$profile"
}

# compile_c NAME OUT_DIR LIB_DIR [extra cc flags...]: links ffi/tests/c/NAME.c statically.
compile_c() {
  local name="$1" out="$2" libdir="$3"
  shift 3
  mkdir -p "$out"
  "$CC" -std=c11 -Wall -Wextra -Werror -pedantic -g -pthread "$@" \
    -I "$ROOT/include" "$ROOT/ffi/tests/c/$name.c" -o "$out/$name" \
    "$libdir/libkvexact.a" -lpthread -ldl -lm
}

#!/usr/bin/env bash
# Builds libkvexact in release mode and installs the header, the static and shared libraries
# and a pkg-config file under PREFIX:
#   PREFIX/include/kvexact.h
#   PREFIX/lib/libkvexact.a, PREFIX/lib/libkvexact.so
#   PREFIX/lib/pkgconfig/kvexact.pc
# Usage: scripts/ffi-install.sh PREFIX        (e.g. /usr/local)
# Then, dynamically: cc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs kvexact)
#   or statically:   cc app.c -IPREFIX/include PREFIX/lib/libkvexact.a -lpthread -ldl -lm
source "$(dirname "$0")/ffi-common.sh"
prefix="${1:?usage: scripts/ffi-install.sh PREFIX}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
# KVEXACT_PROFILE=debug installs the debug build (CI uses it to test this script quickly).
libdir="$(build_lib "${KVEXACT_PROFILE:-release}")"
pkgid="$(cd "$ROOT" && cargo pkgid -p kvexact-ffi)"
version="${pkgid##*[@#]}"
install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 0644 "$ROOT/include/kvexact.h" "$prefix/include/kvexact.h"
install -m 0644 "$libdir/libkvexact.a" "$prefix/lib/libkvexact.a"
install -m 0755 "$libdir/libkvexact.so" "$prefix/lib/libkvexact.so"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$ROOT/ffi/kvexact.pc.in" \
  > "$prefix/lib/pkgconfig/kvexact.pc"
echo "installed libkvexact $version under $prefix"

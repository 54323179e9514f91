#!/usr/bin/env bash
# Builds libkvexact in release mode and installs the header, the static and shared libraries
# and a pkg-config file under PREFIX:
#   PREFIX/include/kvexact.h
#   PREFIX/lib/libkvexact.a
#   PREFIX/lib/libkvexact.so.0 (the shared library; its soname carries the ABI major,
#     KVEXACT_ABI_VERSION) and the link-time symlink PREFIX/lib/libkvexact.so -> libkvexact.so.0
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
abi="$(sed -n 's/^#define KVEXACT_ABI_VERSION \([0-9][0-9]*\)$/\1/p' "$ROOT/include/kvexact.h")"
[ -n "$abi" ] || { echo "include/kvexact.h defines no KVEXACT_ABI_VERSION" >&2; exit 1; }
soname="libkvexact.so.$abi"
# The library must carry that soname (ffi/build.rs sets it on Linux): a program linked with
# -lkvexact records it and loads PREFIX/lib/$soname at run time.
if command -v readelf >/dev/null; then
  have="$(readelf -d "$libdir/libkvexact.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  [ "$have" = "$soname" ] || { echo "$libdir/libkvexact.so has soname '$have', not $soname" >&2; exit 1; }
else
  echo "readelf not installed: the soname ($soname) is not checked" >&2
fi
install -m 0755 "$libdir/libkvexact.so" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libkvexact.so"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$ROOT/ffi/kvexact.pc.in" \
  > "$prefix/lib/pkgconfig/kvexact.pc"
echo "installed libkvexact $version ($soname) under $prefix"

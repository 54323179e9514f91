#!/usr/bin/env bash
# Runs the Go module's checks against libkvexact, offline: go vet and go test (tests and
# Example functions) in go/, then go vet and a run of the example program in examples/go
# (which imports the module through a replace directive), whose output must equal
# examples/encode_and_hash.out.
# Needs Go >= 1.19 (Debian: apt-get install -y golang-go) and pkg-config.
# The module finds libkvexact with `#cgo pkg-config: kvexact`; this script writes a kvexact.pc
# that points at include/ and at a directory holding only libkvexact.a (so the tests link it
# statically; cgo asks pkg-config for --libs, not --static, so that file's Libs carries the
# system libraries the static library needs). With KVEXACT_LIB_DIR set (CI:
# target/debug/deps) that library is used as is.
# Usage: scripts/ffi-go-test.sh [go test flags...]
source "$(dirname "$0")/ffi-common.sh"
command -v go >/dev/null || { echo "go not installed (apt-get install -y golang-go)" >&2; exit 1; }
command -v pkg-config >/dev/null || { echo "pkg-config not installed (apt-get install -y pkg-config)" >&2; exit 1; }
libdir="$(build_lib debug)"
gotmp="$TARGET_DIR/kvexact-go"
staticdir="$gotmp/lib"
mkdir -p "$staticdir" "$gotmp/pkgconfig"
cp "$libdir/libkvexact.a" "$staticdir/libkvexact.a"
pkgid="$(cd "$ROOT" && cargo pkgid -p kvexact-ffi)"
sed -e "s|^prefix=.*|prefix=$ROOT|" -e "s|^libdir=.*|libdir=$staticdir|" \
  -e "s|^includedir=.*|includedir=$ROOT/include|" -e "s|@VERSION@|${pkgid##*[@#]}|g" \
  -e "s|^Libs: \(.*\)|Libs: \1 -lpthread -ldl -lm|" -e "/^Libs.private:/d" \
  "$ROOT/ffi/kvexact.pc.in" >"$gotmp/pkgconfig/kvexact.pc"
export PKG_CONFIG_PATH="$gotmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_ENABLED=1
export GOPROXY=off GO111MODULE=on
export GOCACHE="${GOCACHE:-$gotmp/cache}"
export KVEXACT_ROOT="$ROOT"
cd "$ROOT/go"
go vet ./...
go test -count=1 "$@" ./...
cd "$ROOT/examples/go"
go vet ./...
# Its output must be examples/encode_and_hash.out, which the C example prints too.
go build -o "$gotmp/encode-and-hash" .
"$gotmp/encode-and-hash" "$ROOT/testdata/registry" Qwen/Qwen3-0.6B >"$gotmp/encode-and-hash.out"
cat "$gotmp/encode-and-hash.out"
diff -u "$ROOT/examples/encode_and_hash.out" "$gotmp/encode-and-hash.out"
echo "examples/go: output as examples/encode_and_hash.out"

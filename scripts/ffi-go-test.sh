#!/usr/bin/env bash
# Builds libkvexact and runs the cgo package's tests (examples/go) against it, offline.
# Needs Go >= 1.19 (Debian: apt-get install -y golang-go).
# Usage: scripts/ffi-go-test.sh [go test flags...]
source "$(dirname "$0")/ffi-common.sh"
command -v go >/dev/null || { echo "go not installed (apt-get install -y golang-go)" >&2; exit 1; }
libdir="$(build_lib debug)"
# A directory holding only the static library, so that -lkvexact links it statically.
staticdir="$TARGET_DIR/kvexact-go/lib"
mkdir -p "$staticdir"
cp "$libdir/libkvexact.a" "$staticdir/libkvexact.a"
cd "$ROOT/examples/go"
export CGO_ENABLED=1
export CGO_CFLAGS="-I$ROOT/include"
export CGO_LDFLAGS="-L$staticdir"
export GOPROXY=off GO111MODULE=on
export GOCACHE="${GOCACHE:-$TARGET_DIR/kvexact-go/cache}"
export KVEXACT_ROOT="$ROOT"
go vet ./...
go test -count=1 "$@" ./...

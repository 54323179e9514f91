#!/bin/sh
# The kit's own tests (not part of `cargo test`; CI runs them only with KVEXACT_KIT=1).
# Creates the venv under .kit-cache/ (ignored) once, downloads each wheel once.
set -e
cd "$(dirname "$0")/.."
V=.kit-cache/venv
REQ=$(sha256sum kit/requirements.txt | cut -c1-64)
if [ ! -x "$V/bin/python" ]; then
  python3 -m venv "$V"
fi
if [ "$(cat "$V/.kit-requirements" 2>/dev/null)" != "$REQ" ]; then
  "$V/bin/pip" install -q -r kit/requirements.txt
  echo "$REQ" > "$V/.kit-requirements"
fi
exec "$V/bin/python" -m kit.selftest "$@"

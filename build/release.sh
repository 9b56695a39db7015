#!/usr/bin/env bash
# The release files for one platform: the portable one-file binary and its SHA-256 (see docs/packaging.md).
#
#   build/release.sh              build build/dist/portable/openheim (build.sh --portable), then write
#                                 build/release/openheim-linux-<arch> and openheim-linux-<arch>.sha256
#   build/release.sh --skip-build use the portable binary already built (CI builds it beside the tests)
#
# It checks that the binary starts and that `--version` names the commit it was built from.
# .github/workflows/release.yml runs it on a version tag and attaches both files to the GitHub release.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1
for arg in "$@"; do
    case "$arg" in
        --skip-build) BUILD=0 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "release.sh: unknown option '$arg'; use --skip-build" >&2; exit 2 ;;
    esac
done
die() { echo "release.sh: $*" >&2; exit 1; }

BIN="$ROOT/build/dist/portable/openheim"
[[ "$BUILD" == 1 ]] && bash "$ROOT/build/build.sh" --portable
[[ -x "$BIN" ]] || die "$BIN is not built; run build/build.sh --portable (or drop --skip-build)"

VERSION_LINE="$("$BIN" --version)" || die "$BIN does not start"
COMMIT="$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || true)"
if [[ -n "$COMMIT" && "$VERSION_LINE" != *"(commit $COMMIT"* ]]; then
    die "$BIN says '$VERSION_LINE', not commit $COMMIT: it was built from another checkout; rebuild it"
fi

NAME="openheim-linux-$(uname -m)"
OUT="$ROOT/build/release"
rm -rf "$OUT" && mkdir -p "$OUT"
cp "$BIN" "$OUT/$NAME"
(cd "$OUT" && sha256sum "$NAME" > "$NAME.sha256" && sha256sum --quiet -c "$NAME.sha256")
echo "$VERSION_LINE"
echo "Wrote $OUT/$NAME and $OUT/$NAME.sha256"

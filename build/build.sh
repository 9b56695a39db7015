#!/usr/bin/env bash
# Build the frozen `openheim` executable with PyInstaller (see docs/packaging.md).
#
#   build/build.sh               one file:  build/dist/openheim
#   build/build.sh --onedir      a folder:  build/dist/openheim-onedir/openheim
#   build/build.sh --without-mcp leave the mcp SDK stack out (smaller, faster to start; no MCP servers)
#   build/build.sh --portable    build/dist/portable/openheim, running on glibc 2.31 or later (Debian 11, Ubuntu 20.04+):
#                                built inside a Debian 11 root (root + debootstrap; see build/portable.sh)
#   (or OPENHEIM_ONEDIR=1 / OPENHEIM_WITHOUT_MCP=1 in the environment)
#
# Python environment: $OPENHEIM_BUILD_VENV if set, else the checkout's .venv if it exists, else a new
# venv in build/work/venv made with ${PYTHON:-python3}. A new venv gets pyinstaller, the project's
# dependencies from pyproject.toml and the memory extras (sqlite-vec, pysqlite3-binary); an existing
# one only gets pyinstaller when it lacks it. openheim itself is analysed from this checkout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

is_on() { [[ "${1,,}" =~ ^(1|true|yes|on)$ ]]; }
MODE=onefile
SPEC_ARGS=()
WITH_MCP=1
PORTABLE=0
if is_on "${OPENHEIM_ONEDIR:-}"; then MODE=onedir; fi      # the spec reads these two as well
if is_on "${OPENHEIM_WITHOUT_MCP:-}"; then WITH_MCP=0; fi
for arg in "$@"; do
    case "$arg" in
        --onedir) MODE=onedir; SPEC_ARGS+=(--onedir) ;;
        --without-mcp) WITH_MCP=0; SPEC_ARGS+=(--without-mcp) ;;
        --with-mcp) ;;  # the default now
        --portable) PORTABLE=1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown option '$arg'; use --onedir, --without-mcp and/or --portable" >&2; exit 2 ;;
    esac
done
# The commit `openheim --version` names (with -dirty when tracked files differ from it).
if [[ -z "${OPENHEIM_BUILD_COMMIT:-}" ]] && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    OPENHEIM_BUILD_COMMIT="$(git -C "$ROOT" rev-parse --short=12 HEAD)"
    git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || OPENHEIM_BUILD_COMMIT+="-dirty"
fi
export OPENHEIM_BUILD_COMMIT="${OPENHEIM_BUILD_COMMIT:-unknown}"
if [[ "$PORTABLE" == 1 ]]; then
    P_ARGS=()
    [[ "$MODE" == onedir ]] && P_ARGS+=(--onedir)
    [[ "$WITH_MCP" == 0 ]] && P_ARGS+=(--without-mcp)
    exec "$ROOT/build/portable.sh" "${P_ARGS[@]}"
fi

if [[ -n "${OPENHEIM_BUILD_VENV:-}" ]]; then
    VENV="$OPENHEIM_BUILD_VENV"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
    VENV="$ROOT/.venv"
else
    VENV="$ROOT/build/work/venv"
fi
PY="$VENV/bin/python"

if [[ ! -x "$PY" ]]; then
    echo "Creating build venv in $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip
    mapfile -t DEPS < <("$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
    "$PY" -m pip install --quiet "pyinstaller>=6" "${DEPS[@]}" "sqlite-vec" \
        'pysqlite3-binary; sys_platform == "linux" and (platform_machine == "x86_64" or platform_machine == "aarch64")'
fi
if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
    "$PY" -m pip install --quiet "pyinstaller>=6"
fi
if [[ "$WITH_MCP" == 1 ]] && ! "$PY" -c 'import mcp' 2>/dev/null; then
    "$PY" -m pip install --quiet "mcp>=2.3,<3"
fi
"$PY" -c 'import sqlite_vec' 2>/dev/null || {
    echo "build.sh: sqlite-vec is missing from $VENV; install it: $PY -m pip install sqlite-vec" >&2; exit 1; }

if [[ "$MODE" == onedir ]]; then
    "$PY" -m PyInstaller "$ROOT/build/openheim.spec" --noconfirm --clean --log-level WARN \
        --workpath "$ROOT/build/work/onedir" --distpath "$ROOT/build/dist" -- "${SPEC_ARGS[@]}"
    BIN="$ROOT/build/dist/openheim-onedir/openheim"
    SIZE="$(du -sh "$ROOT/build/dist/openheim-onedir" | cut -f1) (folder)"
else
    # One file = the onedir folder packed behind a small sh launcher that unpacks it once per user and
    # then starts it directly (PyInstaller's own onefile mode unpacks everything on every start).
    "$PY" -m PyInstaller "$ROOT/build/openheim.spec" --noconfirm --clean --log-level WARN \
        --workpath "$ROOT/build/work/onefile" --distpath "$ROOT/build/work/packed" -- --onedir "${SPEC_ARGS[@]}"
    BIN="$ROOT/build/dist/openheim"
    mkdir -p "$ROOT/build/dist"
    bash "$ROOT/build/pack.sh" "$ROOT/build/work/packed/openheim-onedir" "$BIN"
    SIZE="$(du -h "$BIN" | cut -f1)"
fi
"$BIN" --version >/dev/null
echo "Built $BIN"
echo "Size: $SIZE"

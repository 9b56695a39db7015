#!/usr/bin/env bash
# The portable build (build/build.sh --portable): build/dist/portable/openheim, needing glibc <= 2.31.
#
# Everything happens inside a Debian 11 (bullseye) root under build/.portable/root (gitignored), made with
# debootstrap from the Debian mirror this machine's apt uses. Each stage is cached in that root:
#   1. root    debootstrap + the build tools and -dev packages       (stamp /.openheim-root)
#   2. python  CPython 3.11 from Debian's own source package (bookworm's python3.11, patches applied),
#              --enable-shared, no PGO/LTO, into /opt/python3.11     (stamp /opt/python3.11/.openheim-python)
#   3. venv    /opt/venv: pyinstaller + the project's dependencies  (rebuilt when pyproject.toml's change)
#   4. freeze  PyInstaller with build/openheim.spec on a copy of the checkout (always), packed into one
#              file with build/pack.sh as build.sh does (or the folder, with --onedir)
# So every library inside the binary (libpython, libssl, libsqlite3, ...) is linked against bullseye's
# glibc 2.31. The stdlib sqlite3 loads extensions (bullseye's libsqlite3 is bundled), so pysqlite3 is left out.
# Needs root (chroot, mount) and /usr/sbin/debootstrap. OPENHEIM_DEBIAN_MIRROR overrides the mirror;
# `rm -r build/.portable` starts from scratch.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/build/.portable"
R="$WORK/root"
SPEC_ARGS=("$@")
PY_PREFIX=/opt/python3.11
OUT="$ROOT/build/dist/portable"

die() { echo "build.sh --portable: $*" >&2; exit 1; }
[[ "$(id -u)" == 0 ]] || die "needs root (debootstrap, chroot and mount); run it with sudo"
DEBOOTSTRAP="$(command -v debootstrap || echo /usr/sbin/debootstrap)"
[[ -x "$DEBOOTSTRAP" ]] || die "debootstrap is not installed; install it with: apt-get install debootstrap"

host_mirror() {  # the first Debian archive URI in this machine's apt sources, else deb.debian.org
    grep -h -o -E 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
        | head -n1 | tr -d ' ' | sed 's:/*$::' || true
}
MIRROR="${OPENHEIM_DEBIAN_MIRROR:-$(host_mirror)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

stage() { printf '[portable %s] %s\n' "$(date +%T)" "$*" >&2; }

MOUNTED=()
unmount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount -R "${MOUNTED[i]}" 2>/dev/null || umount -l "${MOUNTED[i]}" 2>/dev/null || true
    done
    MOUNTED=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM

mount_root() {
    mountpoint -q "$R/proc" || { mount -t proc proc "$R/proc"; MOUNTED+=("$R/proc"); }
    if ! mountpoint -q "$R/dev"; then
        mount --rbind /dev "$R/dev"
        mount --make-rslave "$R/dev"  # so unmounting never propagates to the host's /dev/pts or /dev/shm
        MOUNTED+=("$R/dev")
    fi
    cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
    cp /etc/hosts "$R/etc/hosts"
}

# Run a bash script inside the root with a clean environment, plus the host's pip settings (but not its
# find-links folder, which does not exist in the root).
in_root() {
    local -a env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
                  DEBIAN_FRONTEND=noninteractive)
    local var
    for var in $(compgen -e | grep -E '^PIP_' | grep -v -x PIP_FIND_LINKS || true); do env+=("$var=${!var}"); done
    [[ -f "$R/opt/host-ca.crt" ]] && env+=(PIP_CERT=/opt/host-ca.crt)
    chroot "$R" /usr/bin/env -i "${env[@]}" bash -euo pipefail -c "$1"
}

# --- 1. root -------------------------------------------------------------------------------------------
BUILD_DEPS=(build-essential pkg-config dpkg-dev xz-utils ca-certificates binutils
            libssl-dev zlib1g-dev libbz2-dev liblzma-dev libffi-dev libsqlite3-dev libexpat1-dev
            uuid-dev libncurses-dev libgdbm-compat-dev)
ROOT_STAMP="$R/.openheim-root"
ROOT_KEY="bullseye ${BUILD_DEPS[*]}"
if [[ ! -f "$ROOT_STAMP" || "$(cat "$ROOT_STAMP")" != "$ROOT_KEY" ]]; then
    if [[ ! -x "$R/usr/bin/apt-get" ]]; then
        stage "debootstrap bullseye from $MIRROR"
        rm -rf "$WORK/root.tmp"
        mkdir -p "$WORK"
        "$DEBOOTSTRAP" --variant=minbase --include=ca-certificates bullseye "$WORK/root.tmp" "$MIRROR" \
            > "$WORK/debootstrap.log" 2>&1 || die "debootstrap failed; see $WORK/debootstrap.log"
        rm -rf "$R"
        mv "$WORK/root.tmp" "$R"
    fi
    stage "apt: build tools and libraries"
    SECURITY="${MIRROR%/debian}/debian-security"
    cat > "$R/etc/apt/sources.list" <<EOF
deb $MIRROR bullseye main
deb $MIRROR bullseye-updates main
deb $SECURITY bullseye-security main
EOF
    # Debian 12's python3.11 source package (bookworm main carries the security fixes up to the last point
    # release); bookworm's archive key comes from this machine's keyring.
    mkdir -p "$R/etc/apt/keyrings"
    cp /usr/share/keyrings/debian-archive-keyring.gpg "$R/etc/apt/keyrings/debian-host.gpg"
    cat > "$R/etc/apt/sources.list.d/bookworm-src.list" <<EOF
deb-src [signed-by=/etc/apt/keyrings/debian-host.gpg] $MIRROR bookworm main
EOF
    mount_root
    in_root "apt-get update -qq && apt-get -y -qq dist-upgrade >/dev/null \
             && apt-get install -y -qq --no-install-recommends ${BUILD_DEPS[*]} >/dev/null && apt-get clean"
    echo "$ROOT_KEY" > "$ROOT_STAMP"
fi
mount_root

# --- 2. python -----------------------------------------------------------------------------------------
PY_STAMP="$R$PY_PREFIX/.openheim-python"
if [[ ! -f "$PY_STAMP" ]]; then
    stage "CPython 3.11 from Debian's python3.11 source package (configure, make -j2, install)"
    in_root "
        rm -rf /opt/src && mkdir -p /opt/src && cd /opt/src
        apt-get update -qq
        apt-get source -qq --only-source python3.11 >/dev/null 2>&1
        cd python3.11-*/
        # Debian's security backports include internal headers in pyexpat.c, which Debian builds into
        # libpython; as a shared module it needs the define upstream 3.12 has at the top of that file.
        if grep -q '#include \"pycore_' Modules/pyexpat.c && ! grep -q Py_BUILD_CORE_MODULE Modules/pyexpat.c; then
            sed -i '1i #ifndef Py_BUILD_CORE_BUILTIN\\n#  define Py_BUILD_CORE_MODULE 1\\n#endif' Modules/pyexpat.c
        fi
        ./configure -q --prefix=$PY_PREFIX --enable-shared --enable-loadable-sqlite-extensions \
            --with-system-expat --with-ensurepip=no --disable-test-modules \
            LDFLAGS='-Wl,-rpath,$PY_PREFIX/lib' > /opt/src/configure.log
        make -j2 > /opt/src/make.log 2>&1 || { tail -40 /opt/src/make.log; exit 1; }
        rm -rf $PY_PREFIX && make altinstall > /opt/src/install.log 2>&1 || { tail -40 /opt/src/install.log; exit 1; }
        $PY_PREFIX/bin/python3.11 -c 'import ssl, sqlite3, ctypes, curses, lzma, bz2, zlib, uuid, pyexpat, _elementtree, _decimal
assert hasattr(sqlite3.Connection, \"enable_load_extension\"), \"sqlite3 cannot load extensions\"'
        dpkg-parsechangelog -S Version > $PY_PREFIX/.openheim-python
        cd / && rm -rf /opt/src
    " || die "compiling CPython inside $R failed (see the output above)"
fi

# --- 3. venv -------------------------------------------------------------------------------------------
# The project's dependencies minus pysqlite3-binary (the stdlib sqlite3 built above loads sqlite-vec).
mapfile -t DEPS < <(python3 -c 'import re, tomllib
for d in tomllib.load(open("'"$ROOT"'/pyproject.toml", "rb"))["project"]["dependencies"]:
    if not re.match(r"pysqlite3", d): print(d)')
BUILD_REQS=("pyinstaller>=6.10" "${DEPS[@]}")
VENV_KEY="$(cat "$PY_STAMP") $(printf '%s\n' "${BUILD_REQS[@]}" | sha256sum | cut -c1-16)"
VENV_STAMP="$R/opt/venv/.openheim-venv"
if [[ ! -f "$VENV_STAMP" || "$(cat "$VENV_STAMP")" != "$VENV_KEY" ]]; then
    stage "venv: pyinstaller and the project's dependencies from the package registry"
    # The host's pip configuration, so the root uses the same index (and certificate settings).
    for f in /etc/pip.conf /etc/xdg/pip/pip.conf /etc/xdg/pip/constraints.txt; do
        if [[ -f "$f" ]]; then mkdir -p "$R$(dirname "$f")"; cp "$f" "$R$f"; fi
    done
    # ... and its CA bundle: the registry may sit behind a proxy whose CA only this machine trusts.
    HOST_CA="${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}"
    HOST_CA="${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}"
    if [[ -f "$HOST_CA" ]]; then cp "$HOST_CA" "$R/opt/host-ca.crt"; fi
    printf '%s\n' "${BUILD_REQS[@]}" > "$R/opt/requirements.txt"
    # pip itself, fetched by the host's pip with the host's settings (the source build has no ensurepip)
    rm -rf "$R/opt/pip-wheel" && mkdir -p "$R/opt/pip-wheel"
    HOST_PIP=""
    for py in python3 "$ROOT/.venv/bin/python"; do
        if "$py" -m pip --version >/dev/null 2>&1; then HOST_PIP="$py"; break; fi
    done
    [[ -n "$HOST_PIP" ]] || die "no pip on this machine to fetch pip with; install python3-pip"
    "$HOST_PIP" -m pip download -q --no-deps --only-binary=:all: -d "$R/opt/pip-wheel" pip \
        || die "downloading pip from the package registry failed"
    PIP_WHEEL="$(cd "$R/opt/pip-wheel" && ls pip-*.whl | head -n1)"
    in_root "
        rm -rf /opt/venv
        $PY_PREFIX/bin/python3.11 -m venv --without-pip /opt/venv
        /opt/venv/bin/python /opt/pip-wheel/$PIP_WHEEL/pip install -q --no-index /opt/pip-wheel/$PIP_WHEEL
        /opt/venv/bin/pip install -q -r /opt/requirements.txt
    " || die "installing the build venv inside $R failed (see the output above)"
    echo "$VENV_KEY" > "$VENV_STAMP"
fi

# --- 4. freeze -----------------------------------------------------------------------------------------
stage "PyInstaller"
rm -rf "$R/src" && mkdir -p "$R/src/build"
cp -a "$ROOT/openheim" "$ROOT/openheim.py" "$ROOT/pyproject.toml" "$R/src/"
cp -a "$ROOT/build/openheim.spec" "$ROOT/build/hooks" "$R/src/build/"
find "$R/src" -name __pycache__ -prune -exec rm -rf {} +
# Always a onedir build; the one file is that folder packed behind build/launcher.sh, as in build.sh.
ONEDIR=0
SPEC_REST=()
for arg in "${SPEC_ARGS[@]}"; do
    if [[ "$arg" == --onedir ]]; then ONEDIR=1; else SPEC_REST+=("$arg"); fi
done
in_root "cd /src && OPENHEIM_BUILD_COMMIT='${OPENHEIM_BUILD_COMMIT:-unknown}' /opt/venv/bin/python -m PyInstaller build/openheim.spec --noconfirm --clean --log-level WARN \
             --workpath /src/build/work --distpath /src/build/dist -- --onedir ${SPEC_REST[*]}"
FOLDER="$R/src/build/dist/openheim-onedir"
in_root "/src/build/dist/openheim-onedir/openheim --version" >/dev/null \
    || die "the built binary does not start inside $R"
mkdir -p "$OUT"
if [[ "$ONEDIR" == 1 ]]; then
    rm -rf "$OUT/openheim-onedir" && cp -a "$FOLDER" "$OUT/"
    BIN="$OUT/openheim-onedir/openheim"
else
    BIN="$OUT/openheim"
    bash "$ROOT/build/pack.sh" "$FOLDER" "$BIN"
fi
echo "Built $BIN"
if [[ "$BIN" == */openheim-onedir/* ]]; then
    echo "Size: $(du -sh "$OUT/openheim-onedir" | cut -f1) (folder)"
else
    echo "Size: $(du -h "$BIN" | cut -f1)"
fi

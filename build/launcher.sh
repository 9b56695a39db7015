#!/bin/sh
# openheim @VERSION@ for Linux: one file holding the frozen openheim folder (docs/packaging.md). The first
# start unpacks it into a private per-user cache; every later start runs it from there at once.
# OPENHEIM_CACHE_DIR chooses the cache (default ${XDG_CACHE_HOME:-~/.cache}/openheim); delete it any time.
id=@ID@
say() { echo "openheim: $*" >&2; }
private_tmp() { echo "${TMPDIR:-/tmp}/openheim-$(id -u)"; }
# Only this user can change these paths: each is no symlink, is ours and is not group- or other-writable.
mine() {
    for p; do [ ! -L "$p" ] && [ -O "$p" ] || return 1; done
    [ -z "$(find "$@" -prune \( -perm -020 -o -perm -002 \) -print 2>&1)" ]
}
# A complete copy: its marker is written only after a verified unpack, and nobody else can have changed it.
# The marker holds the number of files unpacked: a copy that lost some (a cache cleaner) is unpacked again.
ready() { [ -d "$1/$id" ] && [ -f "$1/$id/.unpacked" ] && [ -x "$1/$id/openheim" ] && mine "$1" "$1/$id" "$1/$id/openheim" \
    && [ "$(files "$1/$id")" = "$(cat "$1/$id/.unpacked" 2>/dev/null)" ]; }
files() { find "$1" -type f ! -name .unpacked | wc -l | tr -d ' '; }
# Left by a start that was killed (the name holds its process id): removed by the next start.
sweep() {
    for old in "$1"/.unpack.*; do
        pid=${old##*/.unpack.}; pid=${pid%%.*}
        [ -e "$old" ] && ! kill -0 "$pid" 2>/dev/null && rm -rf "$old"
    done
}
# Make (or tighten) the base directory; false when it cannot be private (a symlink, someone else's).
claim() {
    [ -L "$1" ] || [ -e "$1" ] || (umask 077; mkdir -p "$1") 2>/dev/null
    [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] && chmod 700 "$1" 2>/dev/null && mine "$1"
}
unpack() {
    sweep "$1"
    tmp=$(mktemp -d "$1/.unpack.$$.XXXXXX") || return 1
    mkdir "$tmp/$id" || return 1
    { tail -n +@SKIP@ "$0" | gzip -dc 2>/dev/null; echo $? >"$tmp/status"; } | tar -xf - -C "$tmp/$id" 2>/dev/null
    untar=$? gz=$(cat "$tmp/status" 2>/dev/null)
    if [ -n "$gz" ] && [ "$gz" != 0 ]; then  # gzip's verdict (a CRC error), which tar does not see
        rm -rf "$tmp"; say "$0 is damaged (its payload fails its checksum); download it again"; exit 1
    fi
    [ "$gz" = 0 ] && [ "$untar" = 0 ] && [ -x "$tmp/$id/openheim" ] || { rm -rf "$tmp"; return 1; }
    count=$(files "$tmp/$id") && echo "$count" >"$tmp/$id/.unpacked" || { rm -rf "$tmp"; return 1; }
    # An incomplete copy is set aside; a rename never replaces a non-empty directory, so of two starts
    # at once the first one's copy stays.
    if [ -e "$1/$id" ] || [ -L "$1/$id" ]; then ready "$1" || mv "$1/$id" "$tmp/old" 2>/dev/null; fi
    mv "$tmp/$id" "$1/" 2>/dev/null
    rm -rf "$tmp"
}
if [ -n "$OPENHEIM_CACHE_DIR" ]; then base=$OPENHEIM_CACHE_DIR
elif [ -n "$XDG_CACHE_HOME" ]; then base=$XDG_CACHE_HOME/openheim
elif [ -n "$HOME" ]; then base=$HOME/.cache/openheim
else base=$(private_tmp)
fi
while [ "${base%/}" != "$base" ] && [ "${base%/}" != "" ]; do base=${base%/}; done
if ! ready "$base"; then
    if ! claim "$base"; then
        base=$(private_tmp)
        if ! ready "$base" && ! claim "$base"; then
            say "$base is a symlink or not a private directory of yours; remove it or set OPENHEIM_CACHE_DIR to a directory you own"
            exit 1
        fi
    fi
    if ! ready "$base"; then
        [ -e "$base/$id" ] && say "the copy in $base/$id is incomplete or was changed; unpacking it again"
        unpack "$base"
        ready "$base" || { say "could not unpack into $base (disk full or not writable?); set OPENHEIM_CACHE_DIR"; exit 1; }
    fi
fi
sweep "$base"
exec "$base/$id/openheim" "$@"
exit 127

#!/bin/sh
# openheim @VERSION@ for Linux: one file holding the frozen openheim folder (docs/packaging.md). The first
# start unpacks it into a private per-user cache; every later start runs it from there at once.
# OPENHEIM_CACHE_DIR chooses the cache (default ${XDG_CACHE_HOME:-~/.cache}/openheim); delete it any time.
id=@ID@
private_tmp() { echo "${TMPDIR:-/tmp}/openheim-$(id -u)"; }
if [ -n "$OPENHEIM_CACHE_DIR" ]; then base=$OPENHEIM_CACHE_DIR
elif [ -n "$XDG_CACHE_HOME" ]; then base=$XDG_CACHE_HOME/openheim
elif [ -n "$HOME" ]; then base=$HOME/.cache/openheim
else base=$(private_tmp)
fi
if [ ! -x "$base/$id/openheim" ]; then
    (umask 077; mkdir -p "$base") 2>/dev/null
    if [ ! -d "$base" ] || [ ! -O "$base" ] || [ ! -w "$base" ]; then
        base=$(private_tmp)
        (umask 077; mkdir -p "$base") 2>/dev/null
    fi
    if [ ! -d "$base" ] || [ ! -O "$base" ] || [ ! -w "$base" ]; then
        echo "openheim: cannot make a private cache directory at $base; set OPENHEIM_CACHE_DIR to a directory you own" >&2
        exit 1
    fi
    if [ ! -x "$base/$id/openheim" ]; then
        chmod 700 "$base" || exit 1
        tmp=$(mktemp -d "$base/.unpack.XXXXXX") || exit 1
        if tail -n +@SKIP@ "$0" | gzip -dc | tar -xf - -C "$tmp"; then
            [ -d "$base/$id" ] || mv "$tmp" "$base/$id"  # a start running at the same time may have won
            rm -rf "$tmp"
        else
            rm -rf "$tmp"
            echo "openheim: could not unpack into $base (disk full or not writable?); set OPENHEIM_CACHE_DIR" >&2
            exit 1
        fi
    fi
fi
exec "$base/$id/openheim" "$@"
exit 127

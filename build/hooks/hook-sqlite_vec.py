"""PyInstaller hook: bundle sqlite-vec's loadable extension (vec0.so/.dylib/.dll) next to its package.

``sqlite_vec.loadable_path()`` is ``dirname(__file__)/vec0``, so the library must land in a
``sqlite_vec`` folder inside the bundle. The default ``collect_dynamic_libs`` patterns only match
``lib*.so``, so the patterns are given explicitly; an empty result fails the build instead of
producing a binary whose memory search silently falls back to keywords.
"""
from PyInstaller.utils.hooks import collect_dynamic_libs

binaries = collect_dynamic_libs("sqlite_vec", search_patterns=["vec0.so", "vec0.dylib", "vec0.dll"])
if not binaries:
    raise SystemExit("hook-sqlite_vec: no vec0 library found in the sqlite_vec package; "
                     "reinstall it with: pip install --force-reinstall sqlite-vec")

"""Keep secrets out of this process's initial environment block, which ``/proc/PID/environ`` shows.

A command openheim starts can read ``/proc/<openheim>/environ`` even under Landlock (as root, or as the same
user when the process is dumpable), and that file shows the environment block the process was started
with, whatever Python did with ``os.environ`` since. Once the config is read, the values of the provider
key variables are overwritten in place in that block (Python keeps its own copy in ``os.environ``, so
openheim itself still has them). Measured alternative: re-executing openheim without the variables and
handing them over through a pipe costs a second interpreter start (tens of milliseconds); the overwrite
costs microseconds (tests/bench/bench_sandbox.py prints both).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

_ENV_START_FIELD = 50  # /proc/PID/stat fields (1-based): env_start, env_end (Linux >= 3.5)


def _env_bounds() -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # fields[0] is field 3 (state)
        return int(fields[_ENV_START_FIELD - 3]), int(fields[_ENV_START_FIELD - 2])
    except (OSError, IndexError, ValueError):
        return None


def scrub_initial_environ(names: Iterable[str]) -> list[str]:
    """Overwrite with NUL bytes the values of ``names`` in the initial environment block; the names scrubbed."""
    wanted = {os.fsencode(n) for n in names if n}
    if not wanted or not sys.platform.startswith("linux"):
        return []
    bounds = _env_bounds()
    if bounds is None:
        return []
    start, end = bounds
    try:
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
    except OSError:
        return []
    if len(block) > end - start:
        return []
    try:  # a process may always write its own memory through /proc/self/mem (no ctypes to import)
        mem = os.open("/proc/self/mem", os.O_RDWR)
    except OSError:
        return []
    scrubbed, offset = [], 0
    try:
        for entry in block.split(b"\0"):
            name, sep, value = entry.partition(b"=")
            if sep and name in wanted and value:
                os.pwrite(mem, bytes(len(value)), start + offset + len(name) + 1)
                scrubbed.append(os.fsdecode(name))
            offset += len(entry) + 1
    except OSError:
        pass
    finally:
        os.close(mem)
    return scrubbed

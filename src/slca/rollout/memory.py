"""Give the heap's freed pages back to the system between rollouts.

On CPU, PyTorch allocates activations, KV caches and gradients of a different shape every step (every
rollout has its own length) through glibc's malloc. Freed blocks stay in the process's heap arenas, which
fragment instead of shrinking: an RL run of SmolLM2 on 2 cores grew from 3 GB to 21.6 GB resident by
step 33 and was killed by the kernel's OOM killer, although between steps it held ~3 GB
(`malloc_trim(0)` on the running process brought it from 13.3 GB back to 3.0 GB). The rollout engine
calls `release_freed_memory()` before every batch of episodes, so a run's resident size stays at what it
uses.

    release_freed_memory()   # True where glibc's malloc_trim ran; a no-op elsewhere (macOS, musl, Windows)
    resident_bytes()         # this process's resident set size now (0 where /proc is absent)
    reset_peak_resident()    # start a new high-water mark (Linux: /proc/self/clear_refs); False elsewhere
    peak_resident_bytes()    # the highest resident size since the last reset (or the process start)

Between RL steps SmolLM2's run holds ~2-3 GB; the peak is inside the update (fp32 activations of 30 layers
for G rows of a few hundred tokens, no gradient checkpointing on CPU), so each RL step logs both:
`system/resident_gb` after its rollouts and `system/peak_resident_gb` over the whole step.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import Any

__all__ = ["peak_resident_bytes", "release_freed_memory", "reset_peak_resident", "resident_bytes"]


@functools.cache
def _malloc_trim() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return free heap pages to the system (glibc `malloc_trim(0)`); False where there is no such call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def resident_bytes() -> int:
    """Resident set size of this process in bytes, from /proc/self/statm (0 where it is absent)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def reset_peak_resident() -> bool:
    """Reset this process's resident high-water mark (writes 5 to /proc/self/clear_refs, Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def peak_resident_bytes() -> int:
    """The highest resident size since the last `reset_peak_resident()` (VmHWM; 0 where /proc is absent)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0

"""Child processes of tests and benchmarks (nginx, a proxy process) that must not outlive them."""

from __future__ import annotations

import contextlib
import ctypes
import signal

__all__ = ["die_with_parent"]

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """For `preexec_fn`: ask the kernel to SIGTERM the child when its parent dies.

    The kernel sends the signal when the *thread* that forked the child exits, so start such
    children from a thread that lives as long as they should (tests and `bench` use the main one).
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

#!/usr/bin/env python3
"""The exchanger: an attacker on the node racing kubevol's path checks (issue 36).

For each (path, sibling, target) it keeps a symlink `sibling` -> `target` (an outside directory)
next to `path` and swaps the two with renameat2(RENAME_EXCHANGE), in a tight loop, for the given
time: at any instant `path` is kubevol's directory or the symlink, and the kernel resolves a name
afresh on every call. A path that does not exist yet (the pod is not added yet) is waited for; a
symlink kubevol removed is planted again. At the end (or on SIGTERM) every path is put back as
kubevol made it, and the siblings are removed. Prints {"swaps": [n per path]} as JSON.

Usage: exchanger.py '{"pairs": [[path, sibling, target], ...], "durationMs": 3000}'
"""
import ctypes
import errno
import json
import os
import signal
import stat
import sys
import time

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "armv7l": 382, "ppc64le": 357, "s390x": 347, "riscv64": 276}

libc = ctypes.CDLL(None, use_errno=True)
try:
    _renameat2 = libc.renameat2
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]

    def renameat2(a, b, flags):
        return _renameat2(AT_FDCWD, a, AT_FDCWD, b, flags)

except AttributeError:  # glibc before 2.28: the system call itself
    _nr = SYS_RENAMEAT2[os.uname().machine]

    def renameat2(a, b, flags):
        return libc.syscall(_nr, AT_FDCWD, a, AT_FDCWD, b, flags)


def kind(path):
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "other"


class Pair:
    def __init__(self, path, sibling, target):
        self.path = os.fsencode(path)
        self.sibling = os.fsencode(sibling)
        self.target = target
        self.swaps = 0
        self.aside = 0

    def plant(self):
        """Makes sure exactly one of path and sibling is the symlink, planting it where it is gone."""
        kp, ks = kind(self.path), kind(self.sibling)
        if kp == "link" or ks == "link":
            return
        if ks == "dir":
            if kp == "missing":
                # kubevol removed the symlink standing at its path: its directory goes back.
                renameat2(self.sibling, self.path, RENAME_NOREPLACE)
                return
            # Both are directories (kubevol made its path again): keep the old one aside, inside R.
            self.aside += 1
            renameat2(self.sibling, self.sibling + b".aside%d" % self.aside, RENAME_NOREPLACE)
        if kind(os.path.dirname(self.path)) == "dir" and kind(self.sibling) == "missing":
            try:
                os.symlink(self.target, self.sibling)
            except OSError:
                pass

    def swap(self):
        if renameat2(self.path, self.sibling, RENAME_EXCHANGE) == 0:
            self.swaps += 1
            return
        if ctypes.get_errno() == errno.ENOENT:
            self.plant()

    def restore(self):
        kp, ks = kind(self.path), kind(self.sibling)
        if kp == "link" and ks in ("dir", "other"):
            renameat2(self.path, self.sibling, RENAME_EXCHANGE)
        elif kp == "missing" and ks in ("dir", "other"):
            renameat2(self.sibling, self.path, RENAME_NOREPLACE)
        if kind(self.sibling) == "link":
            try:
                os.unlink(self.sibling)
            except OSError:
                pass


def main():
    spec = json.loads(sys.argv[1])
    pairs = [Pair(*p) for p in spec["pairs"]]
    deadline = time.monotonic() + spec["durationMs"] / 1000
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    for p in pairs:
        p.plant()
    rounds = 0
    while not stop and time.monotonic() < deadline:
        for p in pairs:
            p.swap()
        rounds += 1
        # A directory kubevol made again while its symlink sat aside: plant the symlink again.
        if rounds % 256 == 0:
            for p in pairs:
                p.plant()
    for p in pairs:
        p.restore()
    print(json.dumps({"swaps": [p.swaps for p in pairs]}))


main()

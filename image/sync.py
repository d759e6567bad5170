#!/usr/bin/env python3
"""Mirrors a checkout's files into the image build's own source folder, touching only what changed.

    git ls-files -z --cached --others --exclude-standard | sync.py CHECKOUT DEST

A file whose content is unchanged keeps its old modification time in DEST, so cargo, which
compares times, rebuilds only what really changed: every checkout (a fresh CI clone, a second
worktree) shares one incremental release build. Files no longer listed are removed from DEST.
Prints how many files were written and removed.
"""

import os
import shutil
import sys


def same(a, b):
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def main():
    checkout, dest = sys.argv[1], sys.argv[2]
    listed = [p for p in sys.stdin.buffer.read().decode().split("\0") if p]
    wanted = set()
    written = 0
    for rel in listed:
        src = os.path.join(checkout, rel)
        if not os.path.lexists(src) or os.path.isdir(src):
            continue  # deleted in the work tree but still in the index, or a submodule
        wanted.add(rel)
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if os.path.islink(src):
            target = os.readlink(src)
            if not (os.path.islink(out) and os.readlink(out) == target):
                if os.path.lexists(out):
                    os.remove(out)
                os.symlink(target, out)
                written += 1
            continue
        if os.path.islink(out):
            os.remove(out)
        if not same(src, out):
            shutil.copyfile(src, out)
            written += 1
        mode = os.stat(src).st_mode & 0o777
        if os.stat(out).st_mode & 0o777 != mode:
            os.chmod(out, mode)
    removed = 0
    for root, dirs, files in os.walk(dest, topdown=False):
        for name in files:
            path = os.path.join(root, name)
            if os.path.relpath(path, dest) not in wanted:
                os.remove(path)
                removed += 1
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path) and not os.listdir(path):
                os.rmdir(path)
    print(f"{written} written, {removed} removed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a one-layer OCI image archive (an OCI image layout in a tar), reproducibly.

The same inputs give the same bytes, so the same manifest digest: entries are sorted, every
timestamp is --created (seconds since the epoch; build.sh passes the commit's time), owners are
numeric with empty names, gzip carries no name or time, and the JSON documents are written with
sorted keys. Used by image/build.sh (Stampede's image) and tests/cluster (the node's pause image);
no Docker, no registry.

    oci.py --out image.tar --name ghcr.io/stampede-dev/stampede:0.1.0 --created 1700000000 \
        --user 65532:65532 --entrypoint /usr/local/bin/stampede --env PATH=/usr/local/bin:/bin \
        --file /usr/local/bin/stampede=target/release/stampede:0755 \
        --text /etc/passwd='root:x:0:0::/root:/sbin/nologin'$'\\n':0644 \
        --dir /tmp:1777 --dir /home/nonroot:0755:65532 \
        --symlink /lib64/ld-linux-x86-64.so.2=/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2

Prints the manifest digest (the image's digest, as `ctr images ls` shows it) on stdout.
"""

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class Entry:
    def __init__(self, path, kind, mode, uid=0, data=b"", target=""):
        if not path.startswith("/") or path.endswith("/") or "//" in path or "/../" in path + "/":
            raise SystemExit(f"oci.py: {path!r}: an image path must be absolute and normal")
        self.path, self.kind, self.mode, self.uid = path, kind, mode, uid
        self.data, self.target = data, target


def parse_mode(text, what):
    try:
        return int(text, 8)
    except ValueError:
        raise SystemExit(f"oci.py: {what}: mode {text!r} is not octal") from None


def entries_from(args):
    entries = {}

    def add(entry):
        if entry.path in entries:
            raise SystemExit(f"oci.py: {entry.path} is given twice")
        entries[entry.path] = entry

    for spec in args.file:
        path, rest = spec.split("=", 1)
        source, mode = rest.rsplit(":", 1)
        with open(source, "rb") as f:
            add(Entry(path, tarfile.REGTYPE, parse_mode(mode, path), data=f.read()))
    for spec in args.text:
        path, rest = spec.split("=", 1)
        text, mode = rest.rsplit(":", 1)
        add(Entry(path, tarfile.REGTYPE, parse_mode(mode, path), data=text.encode()))
    for spec in args.dir:
        parts = spec.split(":")
        uid = int(parts[2]) if len(parts) > 2 else 0
        add(Entry(parts[0], tarfile.DIRTYPE, parse_mode(parts[1], parts[0]), uid=uid))
    for spec in args.symlink:
        path, target = spec.split("=", 1)
        add(Entry(path, tarfile.SYMTYPE, 0o777, target=target))
    # Every parent folder exists, root-owned 0755 unless given.
    for path in list(entries):
        parent = path.rsplit("/", 1)[0]
        while parent and parent not in entries:
            entries[parent] = Entry(parent, tarfile.DIRTYPE, 0o755)
            parent = parent.rsplit("/", 1)[0]
    return [entries[p] for p in sorted(entries)]


def tar_bytes(members, mtime):
    """A PAX tar of (name, TarInfo kind, mode, uid, data, link target), in the given order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, mode, uid, data, target in members:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, mtime
            info.uid = info.gid = uid
            info.uname = info.gname = ""
            if kind == tarfile.SYMTYPE:
                info.linkname = target
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return out.getvalue()


def gzip_bytes(data):
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(data)
    return out.getvalue()


def canonical(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--name", required=True, help="image reference, e.g. registry/name:tag")
    p.add_argument("--created", type=int, required=True, help="seconds since the epoch")
    p.add_argument("--user", default="")
    p.add_argument("--entrypoint", action="append", default=[])
    p.add_argument("--cmd", action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--workdir", default="/")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--file", action="append", default=[], help="PATH=SOURCE:MODE")
    p.add_argument("--text", action="append", default=[], help="PATH=CONTENT:MODE")
    p.add_argument("--dir", action="append", default=[], help="PATH:MODE[:UID]")
    p.add_argument("--symlink", action="append", default=[], help="PATH=TARGET")
    args = p.parse_args()

    layer_tar = tar_bytes(
        [(e.path.lstrip("/"), e.kind, e.mode, e.uid, e.data, e.target) for e in entries_from(args)],
        args.created,
    )
    layer = gzip_bytes(layer_tar)
    created = datetime.datetime.fromtimestamp(args.created, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = dict(label.split("=", 1) for label in args.label)
    config = canonical({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": args.user,
            "Entrypoint": args.entrypoint,
            "Cmd": args.cmd,
            "Env": args.env,
            "WorkingDir": args.workdir,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer_tar)]},
        "history": [{"created": created, "created_by": "image/oci.py"}],
    })
    manifest = canonical({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": sha256(config), "size": len(config)},
        "layers": [{"mediaType": LAYER, "digest": sha256(layer), "size": len(layer)}],
    })
    tag = args.name.rsplit(":", 1)[1] if ":" in args.name.rsplit("/", 1)[-1] else "latest"
    index = canonical({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [{
            "mediaType": MANIFEST,
            "digest": sha256(manifest),
            "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": args.name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    })
    blobs = sorted({sha256(b): b for b in (config, manifest, layer)}.items())
    archive = tar_bytes(
        [("blobs", tarfile.DIRTYPE, 0o755, 0, b"", ""), ("blobs/sha256", tarfile.DIRTYPE, 0o755, 0, b"", "")]
        + [(f"blobs/sha256/{d.split(':')[1]}", tarfile.REGTYPE, 0o644, 0, b, "") for d, b in blobs]
        + [("index.json", tarfile.REGTYPE, 0o644, 0, index, ""),
           ("oci-layout", tarfile.REGTYPE, 0o644, 0, canonical({"imageLayoutVersion": "1.0.0"}), "")],
        args.created,
    )
    with open(args.out + ".tmp", "wb") as f:
        f.write(archive)
    os.replace(args.out + ".tmp", args.out)
    print(sha256(manifest))


if __name__ == "__main__":
    sys.exit(main())

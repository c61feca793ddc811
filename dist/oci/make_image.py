#!/usr/bin/env python3
"""Writes chorus's container image as an OCI image archive, directly.

  make_image.py image VERSION ARCH BINARY CA_BUNDLE REPOSITORY OUT.oci.tar
      one image (linux/ARCH: amd64 or arm64) of the static binary: an OCI
      image layout in a tar (index.json, oci-layout, blobs/sha256/...),
      plus the manifest.json of `docker save`, so both `podman load` and
      `docker load` (any version) take it. Named REPOSITORY:VERSION.
  make_image.py index OUT_DIR TAG ARCHIVE...
      one multi-arch OCI layout directory (an image index over the images
      of the archives, named TAG) for
      `skopeo copy --all oci:OUT_DIR:TAG docker://REPOSITORY:TAG`.

No Docker daemon, no buildah: the image is three files and four
directories on top of nothing (FROM scratch), so it is written the way
make_wheel.py writes the wheel. The same inputs give the same bytes
(timestamps from SOURCE_DATE_EPOCH, sorted entries, gzip without a
name or time), on any release runner, for any architecture, without
emulation and without root.

What is in it:
  /chorus                              the static musl binary (ENTRYPOINT)
  /etc/ssl/certs/ca-certificates.crt   the build machine's CA bundle (for
                                       `[tls] ca_files`, SSL_CERT_FILE)
  /etc/passwd, /etc/group              root, and `chorus` (65532), the user
                                       it runs as
  /etc/chorus/                         mount plugins.toml here
  /var/lib/chorus/                     the run store and the plugin cache
                                       (a VOLUME, owned by 65532)
  /tmp/                                (1777) for a writable tmpfs mount
"""

import datetime
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile

UID = GID = 65532
SOURCE = "https://github.com/chorus-mcp/chorus"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ARCHES = {"amd64", "arm64"}


def epoch():
    return int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(binary, ca_bundle):
    """The one layer, uncompressed: deterministic entries in path order."""
    mtime = epoch()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(path, data=None, mode=0o644, owner=0, kind=tarfile.REGTYPE):
            info = tarfile.TarInfo(path)
            info.mtime, info.mode, info.type = mtime, mode, kind
            info.uid = info.gid = owner
            info.uname = info.gname = "chorus" if owner else "root"
            if data is None:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

        directory = tarfile.DIRTYPE
        with open(binary, "rb") as f:
            executable = f.read()
        with open(ca_bundle, "rb") as f:
            certificates = f.read()
        if b"-----BEGIN CERTIFICATE-----" not in certificates:
            sys.exit(f"make_image: {ca_bundle} holds no PEM certificate")
        passwd = (
            "root:x:0:0:root:/root:/sbin/nologin\n"
            f"chorus:x:{UID}:{GID}:chorus:/var/lib/chorus:/sbin/nologin\n"
        )
        group = f"root:x:0:\nchorus:x:{GID}:\n"
        add("chorus", executable, 0o755)
        add("etc/", mode=0o755, kind=directory)
        add("etc/chorus/", mode=0o755, kind=directory)
        add("etc/group", group.encode())
        add("etc/passwd", passwd.encode())
        add("etc/ssl/", mode=0o755, kind=directory)
        add("etc/ssl/certs/", mode=0o755, kind=directory)
        add("etc/ssl/certs/ca-certificates.crt", certificates)
        add("tmp/", mode=0o1777, kind=directory)
        add("var/", mode=0o755, kind=directory)
        add("var/lib/", mode=0o755, kind=directory)
        add("var/lib/chorus/", mode=0o700, owner=UID, kind=directory)
    return buffer.getvalue()


def image_config(version, arch, diff_id):
    created = format_time(epoch())
    return {
        "created": created,
        "architecture": arch,
        "os": "linux",
        "config": {
            "User": f"{UID}:{GID}",
            "Entrypoint": ["/chorus"],
            "Cmd": ["serve", "--http", "0.0.0.0:8080"],
            "ExposedPorts": {"8080/tcp": {}},
            "Volumes": {"/var/lib/chorus": {}},
            "WorkingDir": "/var/lib/chorus",
            "StopSignal": "SIGTERM",
            "Env": [
                # The config: /etc/chorus/plugins.toml when mounted (the
                # "user's file" chorus looks for), else the built-in one.
                "XDG_CONFIG_HOME=/etc",
                # The run store: /var/lib/chorus/runs.sqlite3.
                "XDG_DATA_HOME=/var/lib",
                # Compiled and downloaded plugins, beside the store.
                "XDG_CACHE_HOME=/var/lib/chorus/cache",
                "HOME=/var/lib/chorus",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
            ],
            "Labels": labels(version, created),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "dist/oci/make_image.py"}],
    }


def labels(version, created):
    return {
        "org.opencontainers.image.title": "chorus",
        "org.opencontainers.image.description": "An MCP server that asks a panel of models and synthesizes one answer",
        "org.opencontainers.image.source": SOURCE,
        "org.opencontainers.image.url": SOURCE,
        "org.opencontainers.image.documentation": SOURCE + "/blob/main/docs/deploy.md",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "MIT OR Apache-2.0",
        "org.opencontainers.image.created": created,
    }


def format_time(seconds):
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def image(version, arch, binary, ca_bundle, repository, out):
    if arch not in ARCHES:
        sys.exit(f"make_image: architecture {arch!r} is not one of {sorted(ARCHES)}")
    layer = layer_tar(binary, ca_bundle)
    diff_id = sha256(layer)
    compressed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0) as gz:
        gz.write(layer)
    compressed = compressed.getvalue()
    config = canonical(image_config(version, arch, diff_id))
    manifest = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": sha256(config), "size": len(config)},
            "layers": [{"mediaType": MEDIA_LAYER, "digest": sha256(compressed), "size": len(compressed)}],
            "annotations": {
                "org.opencontainers.image.source": SOURCE,
                "org.opencontainers.image.version": version,
            },
        }
    )
    name = f"{repository}:{version}"
    index = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": sha256(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": arch, "os": "linux"},
                    "annotations": {
                        # podman/skopeo read the first, docker (25+) the second.
                        "org.opencontainers.image.ref.name": name,
                        "io.containerd.image.name": name,
                    },
                }
            ],
        }
    )
    blob = lambda data: "blobs/sha256/" + sha256(data).split(":", 1)[1]  # noqa: E731
    # What `docker load` before 25 reads: the config and the layers by path.
    docker = canonical(
        [{"Config": blob(config), "RepoTags": [name], "Layers": [blob(compressed)]}]
    )
    files = {
        "oci-layout": canonical({"imageLayoutVersion": "1.0.0"}),
        "index.json": index,
        "manifest.json": docker,
        blob(config): config,
        blob(manifest): manifest,
        blob(compressed): compressed,
    }
    write_tar(out, files)
    print(sha256(manifest))


def write_tar(out, files):
    mtime = epoch()
    partial = out + ".partial"
    with tarfile.open(partial, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs/", "blobs/sha256/"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tar.addfile(info)
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(files[path]), 0o644, mtime
            tar.addfile(info, io.BytesIO(files[path]))
    os.replace(partial, out)


def index(out_dir, tag, archives):
    """One OCI layout holding every archive's image under one image index,
    itself named `tag` in index.json (what `skopeo copy --all
    oci:OUT_DIR:TAG` pushes as one multi-arch manifest)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    blobs = os.path.join(out_dir, "blobs", "sha256")
    os.makedirs(blobs)

    def put(data):
        with open(os.path.join(blobs, sha256(data).split(":", 1)[1]), "wb") as f:
            f.write(data)

    entries = []
    for archive in archives:
        with tarfile.open(archive) as tar:
            read = lambda name: tar.extractfile(name).read()  # noqa: E731
            for entry in json.loads(read("index.json"))["manifests"]:
                entry = {k: v for k, v in entry.items() if k != "annotations"}
                entries.append(entry)
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith("blobs/sha256/"):
                    data = read(member.name)
                    if sha256(data) != "sha256:" + member.name.rsplit("/", 1)[1]:
                        sys.exit(f"make_image: {archive}: {member.name} does not match its digest")
                    put(data)
    platforms = [e["platform"]["architecture"] for e in entries]
    if len(set(platforms)) != len(platforms):
        sys.exit(f"make_image: more than one image per architecture: {platforms}")
    image_index = canonical({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": entries})
    put(image_index)
    top = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            {
                "mediaType": MEDIA_INDEX,
                "digest": sha256(image_index),
                "size": len(image_index),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    with open(os.path.join(out_dir, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    with open(os.path.join(out_dir, "index.json"), "wb") as f:
        f.write(canonical(top))
    print(sha256(image_index), ", ".join(f"linux/{p}" for p in platforms))


def main(argv):
    if len(argv) == 7 and argv[0] == "image":
        image(*argv[1:])
    elif len(argv) >= 4 and argv[0] == "index":
        index(argv[1], argv[2], argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

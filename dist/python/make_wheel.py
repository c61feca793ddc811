"""Assembles the `chorus-mcp` wheel around an already built chorus binary.

Usage: python3 make_wheel.py VERSION BINARY README OUT_DIR PLATFORM_TAG...

The wheel has the layout maturin's `bindings = "bin"` gives (how ruff and uv
ship): the binary as a script in `chorus_mcp-VERSION.data/scripts/`, so
`pip install` / `uvx chorus-mcp` / `pipx run chorus-mcp` put `chorus` on
PATH, and a `chorus-mcp` command (a console entry point, so installers make
a native launcher on Windows too) that starts it. It is assembled here
rather than by maturin because maturin builds the binary itself, and the
release build is the slow step: every package reuses the one binary. The
platform tags are the binary's (dist/build.sh knows them per target; a
static Linux binary runs on glibc and musl systems alike, so it gets both
the manylinux and musllinux tags). Deterministic: fixed timestamps, sorted
entries. Standard library only.
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "chorus-mcp"
DIST = "chorus_mcp"
EPOCH = (1980, 1, 1, 0, 0, 0)


def metadata(version: str, readme: str) -> str:
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        "Summary: An MCP server that asks several LLMs at once and merges their answers"
        " (the chorus binary)\n"
        "Home-page: https://github.com/chorus-mcp/chorus\n"
        "License: MIT OR Apache-2.0\n"
        "Keywords: mcp,llm,openrouter,ensemble\n"
        "Classifier: Programming Language :: Rust\n"
        "Project-URL: Source, https://github.com/chorus-mcp/chorus\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


# The `chorus-mcp` command (what `uvx chorus-mcp` and `pipx run chorus-mcp`
# start): the chorus binary the wheel installed into the same scripts
# directory, the way ruff's wheel finds its binary.
LAUNCHER = """\"\"\"Starts the chorus binary this package installed.\"\"\"
import os
import shutil
import subprocess
import sys
import sysconfig


def find() -> str:
    exe = "chorus" + (sysconfig.get_config_var("EXE") or "")
    scheme = sysconfig.get_preferred_scheme("user") if hasattr(sysconfig, "get_preferred_scheme") else None
    for scripts in (sysconfig.get_path("scripts"), scheme and sysconfig.get_path("scripts", scheme)):
        if scripts and os.path.isfile(os.path.join(scripts, exe)):
            return os.path.join(scripts, exe)
    found = shutil.which("chorus")
    if found is None:
        sys.exit("chorus-mcp: the chorus binary is not installed beside this package or on PATH")
    return found


def main() -> None:
    chorus = find()
    if sys.platform == "win32":
        # Windows has no exec: run it with our stdio and pass on its status.
        sys.exit(subprocess.call([chorus, *sys.argv[1:]]))
    os.execv(chorus, [chorus, *sys.argv[1:]])


if __name__ == "__main__":
    main()
"""

ENTRY_POINTS = "[console_scripts]\nchorus-mcp = chorus_mcp.__main__:main\n"


def wheel_file(platforms: list[str]) -> str:
    tags = "".join(f"Tag: py3-none-{p}\n" for p in platforms)
    return (
        "Wheel-Version: 1.0\n"
        "Generator: chorus dist/python/make_wheel.py\n"
        "Root-Is-Purelib: false\n" + tags
    )


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def main(version: str, binary: Path, readme: Path, out_dir: Path, platforms: list[str]) -> Path:
    info = f"{DIST}-{version}.dist-info"
    files: list[tuple[str, bytes, int]] = [
        (f"{DIST}/__init__.py", b"", 0o644),
        (f"{DIST}/__main__.py", LAUNCHER.encode(), 0o644),
        (f"{DIST}-{version}.data/scripts/{binary.name}", binary.read_bytes(), 0o755),
        (f"{info}/METADATA", metadata(version, readme.read_text()).encode(), 0o644),
        (f"{info}/WHEEL", wheel_file(platforms).encode(), 0o644),
        (f"{info}/entry_points.txt", ENTRY_POINTS.encode(), 0o644),
    ]
    record = "".join(record_line(path, data) for path, data, _ in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))

    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{DIST}-{version}-py3-none-{'.'.join(platforms)}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in files:
            entry = zipfile.ZipInfo(path, date_time=EPOCH)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return wheel


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    print(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5:]))

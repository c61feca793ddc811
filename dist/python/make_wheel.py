"""Assembles the `chorus-mcp` wheel around an already built chorus binary.

Usage: python3 make_wheel.py VERSION BINARY README OUT_DIR

The wheel has the layout maturin's `bindings = "bin"` gives (how ruff and uv
ship): the binary as a script in `chorus_mcp-VERSION.data/scripts/`, so
`pip install` / `uvx chorus-mcp` / `pipx run chorus-mcp` put `chorus` on
PATH. It is assembled here rather than by maturin because maturin builds the
binary itself, and the release build is the slow step: every package reuses
the one static musl binary. A static binary runs on any Linux x86_64, hence
both the manylinux and musllinux tags. Deterministic: fixed timestamps,
sorted entries. Standard library only.
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "chorus-mcp"
DIST = "chorus_mcp"
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"]
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
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Project-URL: Source, https://github.com/chorus-mcp/chorus\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )


# `#!python` is rewritten by the installer to the environment's interpreter.
LAUNCHER = """#!python
# chorus-mcp: the chorus binary installed beside this script, under the
# package's name (what `uvx chorus-mcp` and `pipx run chorus-mcp` start).
import os
import shutil
import sys

here = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "chorus")
exe = here if os.access(here, os.X_OK) else shutil.which("chorus")
if exe is None:
    sys.exit("chorus-mcp: the chorus binary is not installed beside this script or on PATH")
os.execv(exe, [exe] + sys.argv[1:])
"""


def wheel_file() -> str:
    tags = "".join(f"Tag: py3-none-{p}\n" for p in PLATFORMS)
    return (
        "Wheel-Version: 1.0\n"
        "Generator: chorus dist/python/make_wheel.py\n"
        "Root-Is-Purelib: false\n" + tags
    )


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def main(version: str, binary: Path, readme: Path, out_dir: Path) -> Path:
    info = f"{DIST}-{version}.dist-info"
    files: list[tuple[str, bytes, int]] = [
        (f"{DIST}-{version}.data/scripts/chorus", binary.read_bytes(), 0o755),
        (f"{DIST}-{version}.data/scripts/chorus-mcp", LAUNCHER.encode(), 0o755),
        (f"{info}/METADATA", metadata(version, readme.read_text()).encode(), 0o644),
        (f"{info}/WHEEL", wheel_file().encode(), 0o644),
    ]
    record = "".join(record_line(path, data) for path, data, _ in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))

    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{DIST}-{version}-py3-none-{'.'.join(PLATFORMS)}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in files:
            entry = zipfile.ZipInfo(path, date_time=EPOCH)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return wheel


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    print(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))

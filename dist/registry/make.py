"""Writes the MCP Registry entry for a release from the template beside this
file (server.json): every @VERSION@ becomes VERSION, and its one `mcpb`
package becomes one per bundle in DIST_DIR (`chorus-PLATFORM.mcpb`, as
dist/build.sh names them), each with its file's sha256. The release
workflow runs it over every platform's bundles; dist/build.sh over one.

Usage: python3 make.py VERSION DIST_DIR OUT
"""

import copy
import hashlib
import json
import sys
from pathlib import Path

version, dist, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
template = (Path(__file__).parent / "server.json").read_text().replace("@VERSION@", version)
entry = json.loads(template)
bundles = sorted(dist.glob("chorus-*.mcpb"))
if not bundles:
    sys.exit(f"no chorus-*.mcpb in {dist}: run dist/build.sh first")
packages = []
for package in entry["packages"]:
    if package["registryType"] != "mcpb":
        packages.append(package)
        continue
    for bundle in bundles:
        one = copy.deepcopy(package)
        one["identifier"] = one["identifier"].replace("@BUNDLE@", bundle.name)
        one["fileSha256"] = hashlib.sha256(bundle.read_bytes()).hexdigest()
        packages.append(one)
entry["packages"] = packages
out.write_text(json.dumps(entry, indent=2) + "\n")

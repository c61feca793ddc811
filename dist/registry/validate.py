"""Validates a server.json against the MCP Registry's schema, vendored
beside this file (server.schema.json; its source URL is in README.md).

Usage: python3 validate.py SERVER_JSON
"""

import json
import sys
from pathlib import Path

import jsonschema

schema = json.loads((Path(__file__).parent / "server.schema.json").read_text())
document = json.loads(Path(sys.argv[1]).read_text())
if document.get("$schema") != schema["$id"]:
    sys.exit(f"{sys.argv[1]}: $schema is {document.get('$schema')!r}, the vendored schema is {schema['$id']!r}")
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
for error in errors:
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    print(f"{sys.argv[1]}: {where}: {error.message}", file=sys.stderr)
sys.exit(1 if errors else 0)

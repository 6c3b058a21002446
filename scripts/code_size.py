#!/usr/bin/env python3
"""Size of the code in src/iodiag: functions over 80 lines and modules over 600 lines (issue 29's limits).

    python scripts/code_size.py [--functions N] [--modules N] [--json] [--check]

A function's length is its ``def`` line to its last line (``ast`` line numbers: docstring, comments and blank
lines inside it included; a nested function counts on its own and inside its parent); a module's is its line
count.  ``--check`` exits 1 when more than 3 functions or more than 1 module are over the limits (the targets of
issue 29), so a branch can see whether it added to either list.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "iodiag"
MAX_LONG_FUNCTIONS = 3
MAX_LONG_MODULES = 1


def sizes(src: Path = SRC, fn_limit: int = 80, mod_limit: int = 600) -> dict:
    functions, modules = [], []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(src.parent).as_posix()
        n = len(text.splitlines())
        if n > mod_limit:
            modules.append({"module": rel, "lines": n})
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > fn_limit:
                    functions.append({"function": f"{rel}:{node.lineno} {node.name}", "lines": length})
    functions.sort(key=lambda f: -f["lines"])
    modules.sort(key=lambda m: -m["lines"])
    return {"function_limit": fn_limit, "module_limit": mod_limit, "functions": functions, "modules": modules}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=80, help="function length limit (lines)")
    ap.add_argument("--modules", type=int, default=600, help="module length limit (lines)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 with more than {MAX_LONG_FUNCTIONS} long functions or {MAX_LONG_MODULES} long module")
    args = ap.parse_args()
    s = sizes(fn_limit=args.functions, mod_limit=args.modules)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{len(s['functions'])} functions over {args.functions} lines:")
        for f in s["functions"]:
            print(f"  {f['lines']:5d}  {f['function']}")
        print(f"{len(s['modules'])} modules over {args.modules} lines:")
        for m in s["modules"]:
            print(f"  {m['lines']:5d}  {m['module']}")
    if args.check:
        return 0 if len(s["functions"]) <= MAX_LONG_FUNCTIONS and len(s["modules"]) <= MAX_LONG_MODULES else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

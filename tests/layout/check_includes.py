#!/usr/bin/env python3
"""The include rules of docs/architecture.md, checked on the source tree (issue 31).

1. Layers: server -> scheduler -> model -> kernels, no include pointing up (grammar, tokenizer
   helpers and the like sit where their directory's rank says).
2. gRPC, httplib and prometheus-cpp only in server/: the layers below report through interfaces.
3. No loops between files: a file is its header and its .cpp together, and it depends on every
   project header either includes; no file may reach itself. A loop means two files that cannot
   be read, built or replaced apart.
Exits 1 naming each breach. KNOWN_LOOPS are the loops still standing in model/, each a private
header or a callback between two halves of one component (the model-family step of issue 31 left
them: none crosses a family); the check fails once one is gone and still listed, so the list only
shrinks.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Lower rank may not include higher. Directories not listed are not checked for layering.
RANK = {"kernels": 0, "model": 1, "grammar": 1, "scheduler": 2, "server": 3}
KNOWN_LOOPS = {
    frozenset({"model/jinja/value", "model/jinja/text"}),            # value printing uses text's quoting
    frozenset({"model/jinja/builtins", "model/jinja/render"}),       # filters call back into the renderer
    frozenset({"model/jinja/parser", "model/jinja/parser_impl"}),    # parser_impl: the parser's private header
    frozenset({"model/llama_runner_state", "model/llama_runner"}),   # the runner's private state
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SERVER_ONLY = re.compile(r'^\s*#\s*include\s+[<"]((?:grpc|grpcpp|prometheus)/[^>"]+|httplib\.h)[>"]', re.M)
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".inc")


def project_files():
    for top in RANK:
        for p in (ROOT / top).rglob("*"):
            if p.suffix in SOURCES and p.is_file():
                yield p.relative_to(ROOT).as_posix()


def module(path):
    return path.rsplit(".", 1)[0]


def main():
    files = sorted(project_files())
    known = set(files)
    deps, errors = {}, []
    for f in files:
        text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
        if not f.startswith("server/"):
            errors += [f"{f} includes {lib}: only server/ may" for lib in SERVER_ONLY.findall(text)]
        for inc in INCLUDE.findall(text):
            if inc not in known:
                continue
            src_top, dst_top = f.split("/")[0], inc.split("/")[0]
            if RANK[dst_top] > RANK[src_top]:
                errors.append(f"{f} includes {inc}: {src_top}/ may not depend on {dst_top}/")
            a, b = module(f), module(inc)
            if a != b:
                deps.setdefault(a, set()).add(b)
    # Loops: depth-first search for a back edge, reporting each loop once by its smallest member.
    state, reported = {}, set()

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for d in sorted(deps.get(m, ())):
            if state.get(d) == 1:
                loop = stack[stack.index(d):] + [d]
                key = frozenset(loop)
                if key not in reported:
                    reported.add(key)
                    if key not in KNOWN_LOOPS:
                        errors.append("include loop: " + " -> ".join(loop))
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(deps):
        if m not in state:
            visit(m, [])
    for gone in KNOWN_LOOPS - reported:
        errors.append("no longer a loop, take it off KNOWN_LOOPS: " + ", ".join(sorted(gone)))
    for e in errors:
        print(e)
    print(f"check_includes: {len(files)} files, {len(errors)} breaches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The layering check: every include and CMake link between folders under src/ must be an edge of
scripts/layering.txt, and a PUBLIC link must be one that the unit's headers expose. Run by ctest
(test `layering`); `check_layering.py SRC_DIR [--table FILE]` exits 1 and prints one line each."""

import argparse
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh"}
HEADER_SUFFIXES = {".h", ".cuh"}
# Quotes or brackets: src/ is an include directory, so <base/log.h> would reach base/ too.
INCLUDE = re.compile(r'^\s*#\s*include\s*(["<]([^">]+)[">])')
# A target belongs to the unit of the CMakeLists.txt that declares it; lm_library(name dir)
# declares lm_<name> for the unit of src/<dir>.
DECLARE = re.compile(r"\b(?:add_library|add_executable)\s*\(\s*([\w.+-]+)")
LM_LIBRARY = re.compile(r"\blm_library\s*\(\s*(\w+)\s+([\w/]+)")
LINK = re.compile(r"\btarget_link_libraries\s*\(")
SCOPES = {"PUBLIC": "PUBLIC", "INTERFACE": "PUBLIC", "LINK_PUBLIC": "PUBLIC",
          "LINK_INTERFACE_LIBRARIES": "PUBLIC", "PRIVATE": "PRIVATE", "LINK_PRIVATE": "PRIVATE"}


def read_table(path):
    """Returns {unit: set of units it may use}; raises ValueError on a malformed table."""
    table = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        unit, sep, rest = line.partition(":")
        unit = unit.strip()
        if not sep or not unit or unit in table:
            raise ValueError(f"{path}:{number}: expected one `unit: used units` line per unit")
        table[unit] = set(rest.split())
    for unit, used in table.items():
        unknown = sorted(used - table.keys())
        if unknown:
            raise ValueError(f"{path}: {unit} uses {' '.join(unknown)}, which have no line")
    cycle = find_cycle(table)
    if cycle:
        raise ValueError(f"{path}: the layers form a cycle: {' -> '.join(cycle)}")
    return table


def find_cycle(table):
    """A list of units that closes a cycle, or None (layers must point one way only)."""
    done = set()

    def visit(unit, path):
        if unit in path:
            return path[path.index(unit):] + [unit]
        if unit in done:
            return None
        for used in sorted(table[unit]):
            found = visit(used, path + [unit])
            if found:
                return found
        done.add(unit)
        return None

    for unit in sorted(table):
        found = visit(unit, [])
        if found:
            return found
    return None


def unit_of(rel_dir, table):
    """The longest table unit that is rel_dir or a folder above it ("server/transport/x" -> the
    "server/transport" line if there is one, else "server"); None when no line covers it."""
    parts = pathlib.PurePosixPath(rel_dir).parts
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n])
        if candidate in table:
            return candidate
    return None


def allowed_text(unit, table):
    used = " ".join(sorted(table[unit]))
    return f"the table allows {unit} -> {used}" if used else f"the table allows {unit} nothing"


def check_includes(src, table, violations):
    """(a) Returns {unit: set of units its headers include} for the PUBLIC-link rule."""
    header_uses = {}
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(src)
        unit = unit_of(rel.parent.as_posix(), table)
        if unit is None:
            violations.append(f"{path}: {rel.parent.as_posix()}/ has no line in the table")
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match or "/" not in match.group(2):
                continue
            spelled = match.group(1)
            target_dir = pathlib.PurePosixPath(match.group(2)).parent.as_posix()
            if not (src / target_dir.split("/")[0]).is_dir():
                continue  # not one of ours (a system or third-party header)
            used = unit_of(target_dir, table)
            if used is None:
                violations.append(f"{path}:{number}: includes {spelled}, but {target_dir}/ has "
                                  "no line in the table")
                continue
            if used == unit:
                continue
            if path.suffix in HEADER_SUFFIXES:
                header_uses.setdefault(unit, set()).add(used)
            if used not in table[unit]:
                violations.append(f"{path}:{number}: {unit} -> {used}: includes {spelled}; "
                                  f"{allowed_text(unit, table)}")
    return header_uses


def cmake_calls(text, opener):
    """Yields (line number of each argument, argument) lists for each `opener(...)` call."""
    text = re.sub(r"#[^\n]*", lambda m: " " * len(m.group(0)), text)  # comments, same offsets
    for match in opener.finditer(text):
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        args = []
        for arg in re.finditer(r"[^\s()]+", text[match.end():end - 1]):
            line = text.count("\n", 0, match.end() + arg.start()) + 1
            args.append((line, arg.group(0)))
        yield args


def target_units(src, table):
    """{target: unit}: each target where it is declared; lm_<unit with _ for /> (lm_kernels_cpu
    for kernels/cpu) also when declared outside its folder (src/CMakeLists.txt)."""
    units = {"lm_" + unit.replace("/", "_"): unit for unit in table}
    for cmake in sorted(src.rglob("CMakeLists.txt")):
        text = cmake.read_text()
        unit = unit_of(cmake.parent.relative_to(src).as_posix(), table)
        for match in DECLARE.finditer(text):
            if unit:
                units[match.group(1)] = unit
        for match in LM_LIBRARY.finditer(text):
            if unit_of(match.group(2), table):
                units["lm_" + match.group(1)] = unit_of(match.group(2), table)
    return units


def exposed_by(unit, header_uses):
    """The units the headers of `unit` and of the units under it include (a library declared in
    server/ also compiles server/transport/ and the other sub-units, so their headers are its
    headers), less those sub-units themselves."""
    inside = lambda other: other == unit or other.startswith(unit + "/")
    return {used for owner, uses in header_uses.items() if inside(owner)
            for used in uses if not inside(used)}


def check_links(src, table, header_uses, violations):
    """(b) every lm_* link is a table edge; (c) a PUBLIC one is exposed by the unit's headers."""
    units = target_units(src, table)
    for cmake in sorted(src.rglob("CMakeLists.txt")):
        for args in cmake_calls(cmake.read_text(), LINK):
            if not args or args[0][1] not in units:
                continue
            unit = units[args[0][1]]
            scope = "PUBLIC"  # the keyword-less signature propagates like PUBLIC
            for number, arg in args[1:]:
                if arg in SCOPES:
                    scope = SCOPES[arg]
                    continue
                used = units.get(arg)
                if used is None or not arg.startswith("lm_") or used == unit:
                    continue
                where = f"{cmake}:{number}: {unit} -> {used}"
                if used not in table[unit]:
                    violations.append(f"{where}: links {arg}; {allowed_text(unit, table)}")
                elif scope == "PUBLIC" and used not in exposed_by(unit, header_uses):
                    violations.append(f"{where}: PUBLIC link to {arg}, but no header of {unit} "
                                      f"includes {used}/; make it PRIVATE")


def check(src, table_path):
    """All violations under src (a list of lines; empty when the layering holds)."""
    table = read_table(table_path)
    src = src.resolve()
    violations = []
    header_uses = check_includes(src, table, violations)
    check_links(src, table, header_uses, violations)
    return violations


def main(argv=None):
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=pathlib.Path, help="the src/ folder to check")
    parser.add_argument("--table", type=pathlib.Path, default=here / "layering.txt")
    args = parser.parse_args(argv)
    try:
        violations = check(args.src, args.table)
    except ValueError as error:
        print(f"layering: {error}", file=sys.stderr)
        return 2
    root = str(args.src.resolve().parent) + "/"
    for line in violations:
        print(line.removeprefix(root))
    if violations:
        print(f"layering: {len(violations)} violation(s) of {args.table}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Random strings from each of XGrammar's built-in format regexes (the regex matches the JSON text
of the string), each checked three ways: that it decodes as a JSON string, and that the value
passes jsonschema's FormatChecker (the formats .venv's jsonschema checks) and jsonschema_rs with
validate_formats. Every count should be 0 where the format is enforced exactly; a count in a
column is a string the grammar admits and that validator refuses.

  .venv/bin/python scripts/bench/xgrammar_formats/fuzz_formats.py [--samples 20000] [--seed 0]

It builds dump_format_regexes.cc against build/libxgrammar.a (make build first) in a temporary
folder, so it reads the patched sources the server links.
"""
from __future__ import annotations

import argparse
import json
import random
import re._constants as C
import re._parser as sre_parse
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import jsonschema_rs

ROOT = Path(__file__).resolve().parents[3]
XGRAMMAR = ROOT / ".cache/xgrammar-0.2.8"
CATEGORIES = {C.CATEGORY_DIGIT: [(0x30, 0x39)],
              C.CATEGORY_WORD: [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F)]}


def format_regexes() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "dump"
        subprocess.run(["g++", "-std=c++17", "-O1", "-w", f"-I{XGRAMMAR}/cpp",
                        f"-I{XGRAMMAR}/include", f"-I{XGRAMMAR}/3rdparty/picojson",
                        f"-I{XGRAMMAR}/3rdparty/dlpack/include", "-DXGRAMMAR_ENABLE_CPPTRACE=0",
                        "-DXGRAMMAR_ENABLE_INTERNAL_CHECK=0", "-DXGRAMMAR_LOG_CUSTOMIZE=1",
                        str(Path(__file__).with_name("dump_format_regexes.cc")),
                        str(ROOT / "build/libxgrammar.a"), "-lpthread", "-o", str(exe)],
                       check=True)
        return json.loads(subprocess.run([str(exe)], check=True, capture_output=True,
                                         text=True).stdout)


class Generator:
    """A random string the regex matches: repetitions capped at 4 past their minimum, wide
    character classes mostly drawn near their start (ASCII), surrogates never."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def char(self, items) -> str:
        negate = any(op == C.NEGATE for op, _ in items)
        ranges = []
        for op, av in items:
            if op == C.LITERAL:
                ranges.append((av, av))
            elif op == C.RANGE:
                ranges.append(av)
            elif op == C.CATEGORY:
                ranges += CATEGORIES[av]
        while True:
            if negate:
                c = self.rng.randint(0, 0x2FF if self.rng.random() < 0.95 else 0x10FFFF)
                if any(lo <= c <= hi for lo, hi in ranges):
                    continue
            else:
                lo, hi = self.rng.choice(ranges)
                if hi - lo > 200 and self.rng.random() < 0.7:
                    hi = lo + 200
                c = self.rng.randint(lo, hi)
            if not 0xD800 <= c <= 0xDFFF:
                return chr(c)

    def string(self, parsed) -> str:
        out = []
        for op, av in parsed:
            if op == C.LITERAL:
                out.append(chr(av))
            elif op == C.NOT_LITERAL:
                out.append(self.char([(C.NEGATE, None), (C.LITERAL, av)]))
            elif op == C.ANY:
                out.append(chr(self.rng.randint(0x20, 0x7E)))
            elif op == C.IN:
                out.append(self.char(av))
            elif op == C.BRANCH:
                out.append(self.string(self.rng.choice(av[1])))
            elif op == C.SUBPATTERN:
                out.append(self.string(av[3]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, sub = av
                hi = lo + 4 if hi == C.MAXREPEAT else min(hi, lo + 4)
                out.extend(self.string(sub) for _ in range(self.rng.randint(lo, hi)))
            elif op != C.AT:
                raise ValueError(f"regex construct {op} not generated")
        return "".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    gen = Generator(args.seed)
    print(f"{'format':22} {'not JSON':>8} {'FormatChecker':>13} {'jsonschema_rs':>13}  first example")
    for fmt, regex in sorted(format_regexes().items()):
        parsed = sre_parse.parse(regex)
        rs = jsonschema_rs.validator_for({"format": fmt}, validate_formats=True)
        not_json = py = rs_bad = 0
        example = ""
        for _ in range(args.samples):
            text = gen.string(parsed)
            try:
                value = json.loads('"' + text + '"')
            except ValueError:
                not_json += 1
                example = example or f"not JSON: {text!r}"
                continue
            if fmt in checker.checkers and not checker.conforms(value, fmt):
                py += 1
                example = example or f"FormatChecker: {value!r}"
            if not rs.is_valid(value):
                rs_bad += 1
                example = example or f"jsonschema_rs: {value!r}"
        checked = "" if fmt in checker.checkers else "-"
        print(f"{fmt:22} {not_json:8} {str(py) if not checked else '-':>13} {rs_bad:13}  {example}")


if __name__ == "__main__":
    main()

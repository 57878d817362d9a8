#!/usr/bin/env python3
"""Tests of scripts/check_layering.py on tiny src/ trees built in a temporary folder: each kind of
violation is reported (file:line, the edge, what the table allows) and a clean tree passes.
Stdlib only; ctest runs it as `layering_self_test`."""

import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_layering.py"

TABLE = """\
# test table
base:
tensor: base
kernels/cpu: base
kernels/cuda: kernels/cpu base
loader: tensor base
server: base
app: server loader base
"""

# A tree that follows TABLE: every include and link is an edge, every PUBLIC link is exposed.
CLEAN = {
    "base/CMakeLists.txt": "lm_library(base base)\n",
    "base/check.h": "#pragma once\n#include <string>\n",
    "tensor/CMakeLists.txt": "lm_library(tensor tensor)\ntarget_link_libraries(lm_tensor PUBLIC lm_base)\n",
    "tensor/tensor.h": '#pragma once\n#include "base/check.h"\n',
    "kernels/cpu/CMakeLists.txt": "lm_library(kernels_cpu kernels/cpu)\n"
                                  "target_link_libraries(lm_kernels_cpu PRIVATE lm_base)\n",
    "kernels/cpu/rope.h": "#pragma once\n",
    "kernels/cpu/rope.cc": '#include "kernels/cpu/rope.h"\n#include "base/check.h"\n',
    "kernels/cuda/rope.cuh": '#pragma once\n#include "kernels/cpu/rope.h"\n',
    "loader/CMakeLists.txt": "lm_library(loader loader)\n"
                             "target_link_libraries(lm_loader PUBLIC lm_tensor\n"
                             "  PRIVATE lm_base nlohmann_json::nlohmann_json)\n",
    "loader/gguf.h": '#pragma once\n#include "tensor/tensor.h"\n#include "nlohmann/json.hpp"\n',
    "loader/gguf.cc": '#include "loader/gguf.h"\n#include "base/check.h"\n',
    "server/CMakeLists.txt": "lm_library(server server)\n"
                             "target_link_libraries(lm_server PRIVATE lm_base)  # lm_loader: no\n",
    "server/transport/http.cc": '#include "base/check.h"\n',
    "app/CMakeLists.txt": "add_executable(launcher main.cc)\n"
                          "target_link_libraries(launcher PRIVATE lm_server lm_loader)\n",
    "app/main.cc": '#include "server/http.h"\n#include "loader/gguf.h"\n',
}


class CheckLayeringTest(unittest.TestCase):
    def run_check(self, changes, table=TABLE):
        """Runs the check on CLEAN with `changes` applied (None deletes a file): (exit, lines)."""
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            files = {**CLEAN, **changes}
            for rel, text in files.items():
                if text is not None:
                    path = root / "src" / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
            (root / "layering.txt").write_text(table)
            result = subprocess.run(
                [sys.executable, str(SCRIPT), str(root / "src"), "--table",
                 str(root / "layering.txt")], capture_output=True, text=True, cwd=tmp)
            return result.returncode, result.stdout.splitlines(), result.stderr

    def assert_reports(self, changes, expected):
        code, lines, _ = self.run_check(changes)
        self.assertEqual(code, 1)
        self.assertEqual(lines, expected)

    def test_clean_tree_passes(self):
        code, lines, stderr = self.run_check({})
        self.assertEqual((code, lines, stderr), (0, [], ""))

    def test_upward_include(self):
        self.assert_reports(
            {"loader/gguf.cc": '#include "loader/gguf.h"\n\n#include "server/http.h"\n'},
            ['src/loader/gguf.cc:3: loader -> server: includes "server/http.h"; '
             "the table allows loader -> base tensor"])

    def test_sibling_kernels_are_separate_units(self):
        self.assert_reports(
            {"kernels/cpu/rope.cc": '#include "kernels/cuda/rope.cuh"\n'},
            ['src/kernels/cpu/rope.cc:1: kernels/cpu -> kernels/cuda: includes '
             '"kernels/cuda/rope.cuh"; the table allows kernels/cpu -> base'])

    def test_sub_folder_belongs_to_the_longest_listed_unit(self):
        changes = {"server/transport/http.cc": '#include "loader/gguf.h"\n'}
        self.assert_reports(changes, [
            'src/server/transport/http.cc:1: server -> loader: includes "loader/gguf.h"; '
            "the table allows server -> base"])
        code, lines, _ = self.run_check(changes, TABLE + "server/transport: loader base\n")
        self.assertEqual((code, lines), (0, []))

    def test_disallowed_link(self):
        self.assert_reports(
            {"server/CMakeLists.txt": "lm_library(server server)\n"
                                      "target_link_libraries(lm_server PRIVATE lm_base\n"
                                      "                      lm_loader)\n"},
            ["src/server/CMakeLists.txt:3: server -> loader: links lm_loader; "
             "the table allows server -> base"])

    def test_disallowed_link_of_an_executable(self):
        self.assert_reports(
            {"app/CMakeLists.txt": "add_executable(launcher main.cc)\n"
                                   "target_link_libraries(launcher PRIVATE lm_kernels_cpu)\n"},
            ["src/app/CMakeLists.txt:2: app -> kernels/cpu: links lm_kernels_cpu; "
             "the table allows app -> base loader server"])

    def test_library_named_apart_from_its_folder(self):
        self.assert_reports(
            {"server/transport/CMakeLists.txt": "lm_library(transport server/transport)\n"
                                                "target_link_libraries(lm_transport PRIVATE\n"
                                                "  lm_loader)\n"},
            ["src/server/transport/CMakeLists.txt:3: server -> loader: links lm_loader; "
             "the table allows server -> base"])

    def test_needless_public_link(self):
        # kernels/cpu's only include of base/ is in a .cc file, so no header exposes it.
        self.assert_reports(
            {"kernels/cpu/CMakeLists.txt": "lm_library(kernels_cpu kernels/cpu)\n"
                                           "target_link_libraries(lm_kernels_cpu PUBLIC lm_base)\n"},
            ["src/kernels/cpu/CMakeLists.txt:2: kernels/cpu -> base: PUBLIC link to lm_base, but "
             "no header of kernels/cpu includes base/; make it PRIVATE"])

    def test_sub_unit_headers_expose_their_library_links(self):
        # lm_server compiles server/transport/ too: a header there may expose lm_base.
        changes = {"server/CMakeLists.txt": "lm_library(server server)\n"
                                            "target_link_libraries(lm_server PUBLIC lm_base)\n"}
        table = TABLE + "server/transport: base\n"
        code, lines, _ = self.run_check(
            {**changes, "server/transport/http.h": '#pragma once\n#include "base/check.h"\n'},
            table)
        self.assertEqual((code, lines), (0, []))
        code, lines, _ = self.run_check(changes, table)
        self.assertEqual(lines, ["src/server/CMakeLists.txt:2: server -> base: PUBLIC link to "
                                 "lm_base, but no header of server includes base/; make it "
                                 "PRIVATE"])

    def test_keyword_less_link_counts_as_public(self):
        self.assert_reports(
            {"server/CMakeLists.txt": "lm_library(server server)\n"
                                      "target_link_libraries(lm_server lm_base)\n"},
            ["src/server/CMakeLists.txt:2: server -> base: PUBLIC link to lm_base, but "
             "no header of server includes base/; make it PRIVATE"])

    def test_bracketed_include_is_checked_too(self):
        self.assert_reports(
            {"loader/gguf.cc": "#include <server/http.h>\n"},
            ["src/loader/gguf.cc:1: loader -> server: includes <server/http.h>; "
             "the table allows loader -> base tensor"])

    def test_folder_without_a_line(self):
        self.assert_reports({"hub/cache.cc": '#include "base/check.h"\n'},
                            ["src/hub/cache.cc: hub/ has no line in the table"])
        self.assert_reports(
            {"base/check.cc": '#include "hub/cache.h"\n', "hub/cache.h": "#pragma once\n"},
            ['src/base/check.cc:1: includes "hub/cache.h", but hub/ has no line in the table',
             "src/hub/cache.h: hub/ has no line in the table"])

    def test_cyclic_table_is_refused(self):
        code, lines, stderr = self.run_check({}, TABLE.replace("base:\n", "base: loader\n"))
        self.assertEqual((code, lines), (2, []))
        self.assertIn("the layers form a cycle: base -> loader -> base", stderr)

    def test_table_naming_an_unlisted_unit_is_refused(self):
        code, lines, stderr = self.run_check({}, TABLE + "hub: base engine\n")
        self.assertEqual((code, lines), (2, []))
        self.assertIn("hub uses engine, which have no line", stderr)


if __name__ == "__main__":
    unittest.main()

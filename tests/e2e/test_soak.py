"""The soak of scripts/soak/run.py for two minutes (SOAK_MINUTES to change it) against the default
model at --max-concurrent-requests: streams, non-streams, OpenAI chat and completions, invalid
requests and clients hanging up mid-stream and while queued. No 5xx, every greedy (and seeded)
answer equal to its run-alone reference, RSS and fds flat after warm-up, gauges back to zero.
The 30-minute run's report is bench/results/issue24_soak.json. The second test runs the same soak
with the server in a memory cgroup (as a container with --memory) and its KV pool sized by the
server from that limit: it must never be OOM-killed nor reach the limit."""

import importlib.util
import json
import os
import sys

import pytest
from conftest import ROOT, bounds_resident_memory, launch_server

_spec = importlib.util.spec_from_file_location("soak_run", ROOT / "scripts/soak/run.py")
soak = sys.modules["soak_run"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak)


# The memory-limited run's limit: the default model's server charges ~120 MiB to its cgroup
# before its KV pool, which it then sizes from the rest (~200 MiB at this limit).
MEMORY_LIMIT_MIB = 640


def run_soak(tmp_path, o, cgroup=None):
    with launch_server(soak.server_args(o), preexec_fn=cgroup.enter if cgroup else None) as server:
        report = soak.Soak(server.port, server.proc.pid, o, log=lambda *_: None,
                           cgroup=cgroup).run()
        log = server.stdout() + server.stderr()
    (tmp_path / "soak.json").write_text(json.dumps(report, indent=1))
    return report, log


def check_report(report, log):
    failed = sorted(k for k, ok in report["checks"].items() if not ok)
    shown = {k: report[k] for k in ("kinds", "num_5xx", "mismatches", "transport_errors",
                                    "unexpected", "post_load_mismatches", "end_gauges",
                                    "flatness", "summary", "cgroup")}  # fmt: skip
    assert not failed, f"{failed}: {json.dumps(shown, indent=1)}\nserver log tail:\n{log[-3000:]}"
    # The mix really ran: every kind was sent, and some of each greedy kind completed.
    for kind in soak.KIND_WEIGHTS:
        assert report["kinds"].get(kind, {}).get("sent", 0) > 0, kind
    for kind in soak.FAMILY:
        assert report["kinds"][kind]["completed"] > 0, kind


def test_soak(tmp_path):
    o = soak.Options(minutes=float(os.environ.get("SOAK_MINUTES", "2")), num_prompts=8)
    check_report(*run_soak(tmp_path, o))


@bounds_resident_memory
def test_soak_in_a_memory_limited_cgroup(tmp_path):
    if reason := soak.memory_cgroup.unavailable():
        pytest.skip(f"no memory cgroup: {reason}")
    o = soak.Options(minutes=float(os.environ.get("SOAK_MINUTES", "2")), num_prompts=8,
                     kv_tokens=0)
    cgroup = soak.memory_cgroup.MemoryCgroup(f"lm-e2e-soak-{os.getpid()}", MEMORY_LIMIT_MIB << 20)
    try:
        report, log = run_soak(tmp_path, o, cgroup)
    finally:
        cgroup.remove()
    # The pool was sized from the cgroup's limit, not from the host's free memory.
    assert "KV budget from cgroup" in log, log[-3000:]
    assert {"not_oom_killed", "peak_below_limit"} <= report["checks"].keys()
    check_report(report, log)

"""Shared fixtures for the end-to-end suite: real `text-generation-launcher` processes on 127.0.0.1.

The server is started the way TGI is started (flags or env vars), on a free port picked by binding
port 0, and is always killed in teardown. One session-wide server serves most tests; the few tests
that need other flags start their own short-lived instance with `launch_server(...)`.
"""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(os.environ.get("TGI_LAUNCHER", ROOT / "build/src/app/text-generation-launcher"))
MODEL = os.environ.get("TGI_E2E_MODEL", str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))

# What a sanitizer build of the launcher (`make sanitize-address`) writes to stderr when it finds
# something: a server that reports one fails the test that started it, even if every response was
# right (a leak is only reported at exit).
SANITIZER_REPORT = re.compile(
    r"ERROR: (Address|Leak)Sanitizer|\.\w+:\d+:\d+: runtime error:|WARNING: ThreadSanitizer"
)

# Set by `make sanitize-address` for its e2e run against the ASan+UBSan launcher, whose shadow
# memory and allocator quarantine add hundreds of MiB to its resident size (measured: OOM-killed
# in the memory-limited soak's 640 MiB cgroup at 650 MiB anonymous RSS, 51 MiB of RSS growth where
# the prefix-cache bound allows 36): tests that bound resident memory would measure the
# instrumentation, not the server.
SANITIZER = os.environ.get("LM_E2E_SANITIZER", "")
bounds_resident_memory = pytest.mark.skipif(
    bool(SANITIZER), reason=f"resident memory is not the server's under {SANITIZER} instrumentation"
)

# Limits of the session server (given through env vars, as TGI's Docker users do).
MAX_INPUT_TOKENS = 256
MAX_TOTAL_TOKENS = 512


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running launcher process; stdout/stderr go to files (never a pipe that could fill up)."""

    def __init__(self, proc, port, out_path, err_path):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.out_path = out_path
        self.err_path = err_path

    def stdout(self) -> str:
        return Path(self.out_path).read_text(errors="replace")

    def stderr(self) -> str:
        return Path(self.err_path).read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, sig=signal.SIGTERM, timeout=30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    # Small HTTP helpers.
    def get(self, path, **kw):
        kw.setdefault("timeout", 30)
        return requests.get(self.url + path, **kw)

    def post(self, path, body=None, **kw):
        kw.setdefault("timeout", 60)
        if body is not None:
            kw["json"] = body
        return requests.post(self.url + path, **kw)

    def metrics(self) -> dict:
        return parse_metrics(self.get("/metrics").text)


def _wait_ready(proc, port, deadline) -> bool:
    """True once the port accepts connections; False if the process died (e.g. port taken)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        time.sleep(0.05)
    raise TimeoutError(f"server on port {port} not ready in time")


def start_server(args=(), env=None, use_flags_for_port=True, timeout=120, attempts=5,
                 preexec_fn=None) -> Server:
    if not LAUNCHER.exists():
        pytest.fail(f"{LAUNCHER} not built (cmake --build build --target text-generation-launcher)")
    last_err = ""
    for _ in range(attempts):
        port = free_port()
        full_env = {k: v for k, v in os.environ.items() if k not in ("HOSTNAME", "PORT", "MODEL_ID")}
        full_env.update(env or {})
        cmd = [str(LAUNCHER)]
        if use_flags_for_port:
            cmd += ["--model-id", MODEL, "--port", str(port), "--hostname", "127.0.0.1"]
        else:
            full_env.update({"MODEL_ID": MODEL, "PORT": str(port), "HOSTNAME": "127.0.0.1"})
        cmd += list(args)
        fd_out, out_path = tempfile.mkstemp(prefix="tgi-e2e-", suffix=".out")
        fd_err, err_path = tempfile.mkstemp(prefix="tgi-e2e-", suffix=".err")
        proc = subprocess.Popen(cmd, stdout=fd_out, stderr=fd_err, env=full_env, cwd=ROOT,
                                preexec_fn=preexec_fn)
        os.close(fd_out)
        os.close(fd_err)
        server = Server(proc, port, out_path, err_path)
        try:
            if _wait_ready(proc, port, time.monotonic() + timeout):
                return server
        except BaseException:
            server.terminate(signal.SIGKILL)
            raise
        last_err = server.stdout() + server.stderr()
        if "in use" not in last_err:  # any failure other than a port collision is fatal
            break
    pytest.fail(f"server failed to start: {last_err}")


@contextlib.contextmanager
def launch_server(args=(), env=None, **kw):
    server = start_server(args, env, **kw)
    try:
        yield server
    finally:
        server.terminate()
        server.terminate(signal.SIGKILL)
        stderr = server.stderr()
        for p in (server.out_path, server.err_path):
            with contextlib.suppress(OSError):
                os.unlink(p)
        report = SANITIZER_REPORT.search(stderr)
        if report:
            pytest.fail(f"the launcher's sanitizer report:\n{stderr[report.start() :][:20000]}")


@pytest.fixture(scope="session")
def server():
    """The shared server: configured through TGI's env vars (MODEL_ID, PORT, MAX_*)."""
    env = {"MAX_INPUT_TOKENS": str(MAX_INPUT_TOKENS), "MAX_TOTAL_TOKENS": str(MAX_TOTAL_TOKENS)}
    with launch_server(env=env, use_flags_for_port=False) as s:
        yield s


# The default model's float copy (`make fixtures-test`) and transformers' prompt logprobs for it
# (scripts/fixtures/make_prompt_logprob_references.py); fp32 activations here as there.
SMOLLM2_F32 = LAUNCHER.parents[2] / "test-models" / "smollm2-f32"
PROMPT_LOGPROBS = json.loads((ROOT / "tests/fixtures/prompt_logprobs/smollm2.json").read_text())
PROMPT_LOGPROB_TOLERANCE = 1e-4


@pytest.fixture(scope="session")
def prefill_logprobs_server():
    """The float copy with --enable-prefill-logprobs (prompt logprobs: TGI's details.prefill,
    OpenAI completions' echo with logprobs), room for the fixture's longest prompt."""
    if not (SMOLLM2_F32 / "config.json").exists():
        pytest.fail(f"{SMOLLM2_F32} missing: run `make fixtures-test`")
    env = {"MAX_INPUT_TOKENS": "1024", "MAX_TOTAL_TOKENS": "1100"}
    with launch_server(["--model-id", str(SMOLLM2_F32), "--enable-prefill-logprobs"], env=env,
                       use_flags_for_port=False) as s:
        yield s


# ---- helpers ---------------------------------------------------------------------------------

_SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text: str) -> dict:
    """Prometheus text → {"name{labels}": float} (labels verbatim, as rendered)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        assert m, f"bad exposition line: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def vllm_series(name: str, labels: str = "") -> str:
    """A vllm: series' key in parse_metrics: vLLM's model_name label (the served model id, MODEL
    here) before the series' own labels."""
    escaped = MODEL.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    model = f'model_name="{escaped}"'
    return f"{name}{{{model}{',' + labels if labels else ''}}}"


def sse_events(raw: bytes):
    """Split an SSE body into the JSON payloads of its `data:` events (asserting TGI framing)."""
    assert raw.endswith(b"\n\n"), raw[-80:]
    events = []
    for block in raw.split(b"\n\n")[:-1]:
        assert block.startswith(b"data:"), block
        assert not block.startswith(b"data: "), "TGI (axum) writes no space after data:"
        assert b"\n" not in block, block
        events.append(json.loads(block[len(b"data:") :]))
    return events


def raw_request(port, method, path, body=b"", headers=None, timeout=30) -> socket.socket:
    """Send one HTTP/1.1 request over a fresh socket and return the socket (response unread)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    hdrs = {"Host": f"127.0.0.1:{port}", "Content-Length": str(len(body))}
    hdrs.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


def gen_body(inputs="Hello", **params) -> dict:
    params.setdefault("max_new_tokens", 5)
    return {"inputs": inputs, "parameters": params}

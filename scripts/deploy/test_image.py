"""The image, deployed as TGI's deployment guide deploys TGI, checked end to end with podman.

Run by scripts/deploy/test_image.sh (which builds the base and the image first); `make test` runs
it only with IMAGE_TESTS=1 and podman present. Every container publishes on 127.0.0.1 only; the
stand-in Hub (tests/e2e/fake_hub.py) listens on 127.0.0.1 too, and the container that downloads
from it reaches it through slirp4netns' host-loopback address (10.0.2.2).

What it shows, in order:
- the runtime image's size, and its time from `podman run` to a ready /health on the default model
  (written to the results file with the other figures);
- the guide's deployment: the command `text-generation-launcher --json-output --port 8080`, its four
  MAX_* variables, an API key, a /data volume and a Hub model: ready, a generate, a streamed chat
  through the `openai` client, 401 without the key, every log line JSON; `podman stop` lets an
  in-flight stream finish and the container exits 0;
- a second container on the same volume, as a non-root UID with a read-only root filesystem, starts
  with the Hub gone (HF_HUB_OFFLINE=1) from what the first left in /data;
- a container under `--memory` sizes its KV cache inside that limit and stays inside it under load;
- deploy/kubernetes/deployment.yaml (with its ConfigMap, Secret and PVC) under `podman kube play`:
  ready, a generate, teardown.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from fake_hub import FakeHub  # noqa: E402

IMAGE = os.environ.get("LM_IMAGE", "localhost/lm-infer:latest")
RESULTS = Path(os.environ.get("LM_IMAGE_RESULTS", ROOT / "bench/results/issue18_image.json"))
HUB_MODEL_DIR = ROOT / "build/test-models/smollm2-f32"  # SmolLM2-135M-Instruct in HF layout
HUB_REPO = "lm-infer-test/SmolLM2-135M-Instruct"
API_KEY = "image-test-key"
# The four sizing variables of TGI's deployment guide.
GUIDE_ENV = {"MAX_INPUT_LENGTH": "1024", "MAX_TOTAL_TOKENS": "2048",
             "MAX_BATCH_PREFILL_TOKENS": "1024", "MAX_BATCH_TOTAL_TOKENS": "8192"}
GUIDE_COMMAND = ["text-generation-launcher", "--json-output", "--port", "8080"]
# Resource limits may only be lowered here: runc fails to raise them (issue 18's notes).
SLIRP_HOST = "10.0.2.2"  # this machine's 127.0.0.1 inside a slirp4netns:allow_host_loopback network
RUN_FLAGS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]

results: dict = {}


def podman(*args, check=True, timeout=600, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(["podman", "--runtime", os.environ.get("LM_OCI_RUNTIME", "runc"), *args],
                       capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Container:
    """One `podman run -d`, published on 127.0.0.1, removed at the end."""

    def __init__(self, name, args, container_port=8080):
        self.name = f"lm-image-test-{name}"
        self.port = free_port()
        podman("rm", "-f", self.name, check=False)
        self.started = time.monotonic()
        podman("run", "-d", "--name", self.name, *RUN_FLAGS,
               "-p", f"127.0.0.1:{self.port}:{container_port}", *args)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout=600) -> float:
        """Seconds from `podman run` to the first 200 from /health."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return time.monotonic() - self.started
            except requests.RequestException:
                pass
            state = self.state()
            assert state["Running"], f"{self.name} exited {state['ExitCode']}:\n{self.logs()}"
            time.sleep(0.02)
        raise AssertionError(f"{self.name} not ready after {timeout} s:\n{self.logs()}")

    def state(self) -> dict:
        return json.loads(podman("inspect", "--format", "{{json .State}}", self.name).stdout)

    def logs(self) -> str:
        p = podman("logs", self.name, check=False)
        return p.stdout + p.stderr

    def generate(self, prompt="What is deep learning?", key=API_KEY, n=16) -> requests.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return requests.post(self.url + "/generate", headers=headers, timeout=120,
                             json={"inputs": prompt, "parameters": {"max_new_tokens": n}})

    def remove(self):
        podman("rm", "-f", "-t", "5", self.name, check=False)


@pytest.fixture(scope="session", autouse=True)
def write_results():
    yield
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    previous.update(results)
    RESULTS.write_text(json.dumps(previous, indent=2) + "\n")


@pytest.fixture(scope="session")
def hub():
    if not (HUB_MODEL_DIR / "config.json").exists():
        pytest.fail(f"{HUB_MODEL_DIR} missing: run `make fixtures-test` first")
    hub = FakeHub()
    files = {p.name: p.read_bytes() for p in HUB_MODEL_DIR.iterdir() if p.is_file()}
    hub.add_repo(HUB_REPO).commit(files)
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture(scope="session")
def data_volume():
    """A host folder as /data, shared by the guide's container and the offline one after it."""
    d = Path(tempfile.mkdtemp(prefix="lm-image-data-"))
    d.chmod(0o755)  # as a fresh volume's root (mkdtemp makes it 0700: no other UID could enter)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_image_size_and_entrypoint():
    inspect = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    size_mb = inspect["Size"] / 1e6
    results["image"] = IMAGE
    results["image_size_mb"] = round(size_mb, 1)
    config = inspect["Config"]
    assert config["Entrypoint"] == ["text-generation-launcher"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["PORT"] == "80" and env["HF_HOME"] == "/data"
    assert "/data" in config.get("Volumes", {})
    assert size_mb < 250, f"runtime image is {size_mb:.0f} MB, target < 250 MB"


def test_default_model_offline_and_time_to_ready():
    """`podman run image` with no arguments: the embedded model on port 80, nothing downloaded."""
    times = []
    for i in range(3):
        c = Container(f"default-{i}", [IMAGE], container_port=80)
        try:
            times.append(c.wait_ready(timeout=60))
            r = c.generate(key=None)
            assert r.status_code == 200, r.text
            assert r.json()["generated_text"]
            info = requests.get(c.url + "/info", timeout=10).json()
            assert info["model_id"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
        finally:
            c.remove()
    results["time_to_ready_s"] = {"runs": [round(t, 3) for t in times],
                                  "median": round(statistics.median(times), 3),
                                  "from": "podman run -d to the first 200 from /health"}
    assert statistics.median(times) < 2.0, times


def _stream_generate(url, out: dict):
    """A long /generate_stream, recording each event; runs while the container is stopped."""
    try:
        with requests.post(url + "/generate_stream", stream=True, timeout=120,
                           headers={"Authorization": f"Bearer {API_KEY}"},
                           # Greedy SmolLM2 keeps counting past 160 tokens: ends on length.
                           json={"inputs": "Count from 1 to 200: 1, 2, 3, 4, 5, 6,",
                                 "parameters": {"max_new_tokens": 160, "details": True}}) as r:
            out["status"] = r.status_code
            for line in r.iter_lines():
                if line.startswith(b"data:"):
                    out.setdefault("events", []).append(json.loads(line[5:]))
                    out["last_event_at"] = time.monotonic()
    except Exception as e:  # recorded, asserted on by the test
        out["error"] = repr(e)


def test_the_guides_deployment(hub, data_volume):
    # The Hub, as the container sees this machine's loopback.
    hub_url = hub.url.replace("127.0.0.1", SLIRP_HOST)
    env = {**GUIDE_ENV, "API_KEY": API_KEY, "MODEL_ID": HUB_REPO, "HF_ENDPOINT": hub_url}
    args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    c = Container("guide", ["--network", "slirp4netns:allow_host_loopback=true",
                            "-v", f"{data_volume}:/data", *args,
                            "--entrypoint", json.dumps(GUIDE_COMMAND), IMAGE])
    try:
        results["guide_time_to_ready_s"] = round(c.wait_ready(timeout=600), 2)
        # The Hub model landed in /data as huggingface_hub lays it out.
        assert (data_volume / "hub" / f"models--{HUB_REPO.replace('/', '--')}" / "snapshots").is_dir()
        info = requests.get(c.url + "/info", timeout=10).json()
        assert info["model_id"] == HUB_REPO
        assert info["max_input_tokens"] == 1024 and info["max_total_tokens"] == 2048
        assert "--max-batch-total-tokens 8192 given" in c.logs()

        r = c.generate()
        assert r.status_code == 200, r.text
        assert r.json()["generated_text"].strip()
        r = c.generate(key=None)
        assert r.status_code == 401, r.text
        r = c.generate(key="wrong")
        assert r.status_code == 401, r.text

        import openai
        client = openai.OpenAI(base_url=c.url + "/v1", api_key=API_KEY)
        stream = client.chat.completions.create(
            model="tgi", stream=True, max_tokens=24,
            messages=[{"role": "user", "content": "Say hello in three words."}])
        chunks = list(stream)
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        assert text.strip() and chunks[-1].choices[-1].finish_reason in ("stop", "length")
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=c.url + "/v1", api_key="wrong").chat.completions.create(
                model="tgi", max_tokens=4, messages=[{"role": "user", "content": "hi"}])

        # podman stop (SIGTERM) while a stream runs: it finishes, then the launcher exits 0.
        out: dict = {}
        t = threading.Thread(target=_stream_generate, args=(c.url, out))
        t.start()
        deadline = time.monotonic() + 60
        while not out.get("events") and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.02)
        assert out.get("events"), out
        stop_started = time.monotonic()
        podman("stop", "-t", "60", c.name, timeout=120)
        results["guide_stop_s"] = round(time.monotonic() - stop_started, 2)
        t.join(timeout=60)
        assert "error" not in out, out.get("error")
        last = out["events"][-1]
        assert out["last_event_at"] > stop_started, "the stream ended before the stop: not a drain"
        assert last["details"]["finish_reason"] == "length", last
        assert last["details"]["generated_tokens"] == 160
        state = c.state()
        assert state["ExitCode"] == 0 and not state["OOMKilled"], state

        # --json-output: every line the launcher wrote is one JSON object with TGI's fields.
        lines = [ln for ln in c.logs().splitlines() if ln.strip()]
        assert len(lines) > 5
        for ln in lines:
            rec = json.loads(ln)
            assert {"timestamp", "level", "fields", "target"} <= rec.keys(), rec
        messages = " ".join(json.loads(ln)["fields"].get("message", "") for ln in lines)
        assert "graceful" in messages.lower() or "shutdown" in messages.lower(), messages
    finally:
        c.remove()


def test_second_container_starts_offline_from_the_volume_as_non_root(hub, data_volume):
    """The Hub is gone; a non-root UID with a read-only root filesystem serves from /data."""
    assert (data_volume / "hub").is_dir(), "run after test_the_guides_deployment"
    hub.stop()
    env = {**GUIDE_ENV, "API_KEY": API_KEY, "MODEL_ID": HUB_REPO, "HF_HUB_OFFLINE": "1"}
    args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    c = Container("offline", ["--user", "1000:1000", "--read-only", "--tmpfs", "/tmp",
                              "-v", f"{data_volume}:/data:ro", *args,
                              "--entrypoint", json.dumps(GUIDE_COMMAND), IMAGE])
    try:
        c.wait_ready(timeout=120)
        r = c.generate()
        assert r.status_code == 200, r.text
        podman("stop", "-t", "30", c.name, timeout=60)
        assert c.state()["ExitCode"] == 0
    finally:
        c.remove()


def _memory_current(name) -> int:
    """The container cgroup's memory.current (bytes), read through podman."""
    stats = json.loads(podman("stats", "--no-stream", "--format", "json", name).stdout)[0]
    usage = stats["mem_usage"].split("/")[0].strip()
    units = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "B": 1}
    for unit, scale in units.items():
        if usage.endswith(unit):
            return int(float(usage[: -len(unit)]) * scale)
    raise AssertionError(stats)


def test_memory_limit_sizes_the_kv_cache_and_holds_under_load():
    limit_mb = 768
    plan = podman("run", "--rm", *RUN_FLAGS, "--memory", f"{limit_mb}m", IMAGE,
                  "--dry-run", "--json-output", check=False)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    plan_json = next(j for j in map(json.loads, plan.stdout.splitlines()) if "memory" in j)
    results["memory_limit_plan"] = plan_json["memory"] | {
        "max_batch_total_tokens": plan_json["max_batch_total_tokens"]}
    memory = plan_json["memory"]
    assert memory["cgroup"] is not None and "cgroup" in memory["source"], memory
    assert memory["available_bytes"] <= limit_mb * 2**20
    assert memory["weights_bytes"] + memory["kv_budget_bytes"] < limit_mb * 2**20
    c = Container("memory", ["--memory", f"{limit_mb}m", IMAGE, "--json-output"], container_port=80)
    try:
        c.wait_ready(timeout=60)
        peak = 0
        # Distinct long prompts fill the prefix cache, as ordinary mixed traffic does.
        for i in range(48):
            prompt = f"Request {i}: " + " ".join(f"word{i}x{j}" for j in range(300))
            r = c.generate(prompt=prompt, key=None, n=8)
            assert r.status_code in (200, 422), r.text
            if i % 8 == 7:
                peak = max(peak, _memory_current(c.name))
        state = c.state()
        assert state["Running"] and not state["OOMKilled"], state
        results["memory_limit_mb"] = limit_mb
        results["memory_peak_mb_under_load"] = round(peak / 1e6, 1)
        assert peak < limit_mb * 1e6
    finally:
        c.remove()


def test_kubernetes_deployment_under_podman_kube_play():
    """deploy/kubernetes: the Deployment with its ConfigMap, Secret and PVC, as one kube play."""
    k8s = ROOT / "deploy/kubernetes"
    docs = []
    for name in ("pvc.yaml", "configmap.yaml", "secret.yaml", "deployment.yaml"):
        for d in yaml.safe_load_all((k8s / name).read_text()):
            if d:
                docs.append(d)
    port = free_port()
    for d in docs:
        if d["kind"] == "Deployment":
            d["spec"]["replicas"] = 1
            container = d["spec"]["template"]["spec"]["containers"][0]
            container["image"] = IMAGE
            # What a Service would route to, published on this machine's loopback only.
            container["ports"][0].update(hostIP="127.0.0.1", hostPort=port)
    play_dir = Path(tempfile.mkdtemp())
    play = play_dir / "play.yaml"
    # podman 4.3's kube play cannot read a Secret document back (it stores the YAML, then parses
    # a podman secret as a JSON map of key -> base64 value): the same keys go in as that map,
    # through `podman secret create`, as podman's documentation for secretKeyRef describes.
    secret = next(d for d in docs if d["kind"] == "Secret")
    docs.remove(secret)
    key = secret["stringData"]["API_KEY"]
    secret_json = play_dir / "secret.json"
    secret_json.write_text(json.dumps({k: base64.b64encode(v.encode()).decode()
                                       for k, v in secret["stringData"].items()}))
    play.write_text(yaml.safe_dump_all(docs))
    # kube play takes no --ulimit: the lowered limits come from a containers.conf of its own.
    conf = play_dir / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n')
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    podman("kube", "down", str(play), check=False, env=env)
    podman("secret", "rm", secret["metadata"]["name"], check=False)
    volume = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")["metadata"]["name"]
    podman("volume", "rm", "-f", volume, check=False)
    podman("secret", "create", secret["metadata"]["name"], str(secret_json))
    podman("kube", "play", str(play), timeout=300, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, podman("pod", "logs", "lm-infer-pod", check=False)
            time.sleep(0.2)
        r = requests.post(url + "/generate", headers={"Authorization": f"Bearer {key}"},
                          json={"inputs": "Hello", "parameters": {"max_new_tokens": 8}}, timeout=60)
        assert r.status_code == 200, r.text
        assert requests.post(url + "/generate", json={"inputs": "Hello"}, timeout=60).status_code == 401
    finally:
        podman("kube", "down", str(play), check=False, timeout=300, env=env)
        podman("secret", "rm", secret["metadata"]["name"], check=False)
        podman("volume", "rm", "-f", volume, check=False)
    results["kube_play"] = "ready, generate 200, 401 without the key, teardown"

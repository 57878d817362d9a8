"""deploy/kubernetes/deployment.yaml's container, run as a process: the command, and the environment
the pod would get (the ConfigMap through envFrom, the env entries, the Secret's example values).

tests/deploy/ checks the manifests against the sources; this shows that the launcher really starts
with exactly that configuration (the ConfigMap's lengths pass its checks, no variable is refused),
that every probe path answers 200 without the API key while generation needs it, and that SIGTERM
ends it with 0. Stand-ins for what only the image and the cluster provide: the built launcher for
the image's, MODEL_ID = the default model for the one the image embeds, a temporary folder for the
/data volume, a free loopback port for 8080 (tests/deploy checks the port's consistency).
"""
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from conftest import LAUNCHER, MODEL, ROOT, Server, _wait_ready, free_port, gen_body

K8S = ROOT / "deploy" / "kubernetes"


def _one(kind, name=None):
    docs = [d for p in K8S.glob("*.yaml") for d in yaml.safe_load_all(p.read_text())
            if d and d.get("kind") == kind and name in (None, d["metadata"]["name"])]
    assert len(docs) == 1, (kind, name)
    return docs[0]


def _pod_command_and_env(data_dir, port):
    container = _one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {}
    for src in container.get("envFrom", []):
        env.update(_one("ConfigMap", src["configMapRef"]["name"])["data"])
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            env[e["name"]] = _one("Secret", ref["name"])["stringData"][ref["key"]]
    env["HF_HOME"] = str(data_dir)  # the volume's mountPath, /data in the pod
    env["MODEL_ID"] = MODEL  # the image's embedded default model
    cmd = list(container["command"]) + list(container.get("args", []))
    assert Path(cmd[0]).name == "text-generation-launcher"
    cmd[0] = str(LAUNCHER)
    cmd[cmd.index("--port") + 1] = str(port)
    probes = [container[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")]
    return cmd, env, probes, env["API_KEY"]


def test_deployment_container_starts_probes_pass_and_sigterm_exits_0():
    with tempfile.TemporaryDirectory() as data_dir:
        port = free_port()
        cmd, pod_env, probes, api_key = _pod_command_and_env(data_dir, port)
        env = {k: v for k, v in os.environ.items() if k not in ("PORT", "MODEL_ID")}
        env.update(pod_env)
        env["HOSTNAME"] = "127.0.0.1"  # the pod name in a cluster (-> 0.0.0.0); loopback here
        out = tempfile.NamedTemporaryFile(prefix="tgi-k8s-", suffix=".out", delete=False)
        err = tempfile.NamedTemporaryFile(prefix="tgi-k8s-", suffix=".err", delete=False)
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT)
        server = Server(proc, port, out.name, err.name)
        try:
            assert _wait_ready(proc, port, time.monotonic() + 120), server.stdout() + server.stderr()
            for path in probes:
                assert server.get(path).status_code == 200, path
            assert server.post("/generate", gen_body("Hi")).status_code == 401
            ok = server.post("/generate", gen_body("Hi"), headers={"Authorization": f"Bearer {api_key}"})
            assert ok.status_code == 200, ok.text
            # The ConfigMap's limits are the ones served.
            info = server.get("/info").json()
            cfg = _one("ConfigMap", "lm-infer-config")["data"]
            assert info["max_input_tokens"] == int(cfg["MAX_INPUT_LENGTH"])
            assert info["max_total_tokens"] == int(cfg["MAX_TOTAL_TOKENS"])
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            # --json-output: one JSON object per line; the configuration draws no warning.
            levels = [json.loads(line)["level"] for line in server.stdout().splitlines()]
            assert levels and set(levels) == {"INFO"}, server.stdout()
        finally:
            server.terminate(signal.SIGKILL)
            for p in (out.name, err.name):
                os.unlink(p)

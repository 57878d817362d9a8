#!/usr/bin/env python3
"""Measures the launcher's resident memory under the manifests' settings, to size the Deployment.

Starts the server with the ConfigMap's variables (read from configmap.yaml, so the measurement and
the manifests cannot drift apart), then reports VmRSS/VmHWM from /proc: once ready, after a few
short requests, and after distinct long prompts have filled the whole KV pool
(MAX_BATCH_TOTAL_TOKENS). The last figure is the one the memory request must cover: finished
sequences stay in the prefix cache, so under ordinary traffic the pool fills up sooner or later.

  .venv/bin/python deploy/kubernetes/measure_memory.py \
      --launcher build/src/app/text-generation-launcher \
      --model-id models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
import yaml

HERE = Path(__file__).resolve().parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mem(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB -> MiB
    return fields


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launcher", required=True)
    ap.add_argument("--model-id", required=True)
    ap.add_argument("--fill-prompt-tokens", type=int, default=1800)
    args = ap.parse_args()

    config = yaml.safe_load((HERE / "configmap.yaml").read_text())["data"]
    env = {k: v for k, v in os.environ.items() if k != "HOSTNAME"}
    env.update(config)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [args.launcher, "--model-id", args.model_id, "--port", str(port), "--hostname", "127.0.0.1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if requests.get(base + "/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                sys.exit("server did not start: " + proc.stderr.read())
            time.sleep(0.2)
        print(f"settings: {config}")
        print(f"ready:               {mem(proc.pid)}")
        for i in range(5):
            requests.post(base + "/generate", json={
                "inputs": f"Question {i}: what is the capital of France?",
                "parameters": {"max_new_tokens": 32}}, timeout=120).raise_for_status()
        print(f"after 5 requests:    {mem(proc.pid)}")
        # Distinct prompts (no shared prefix) until their tokens exceed the KV pool once over.
        total = int(config["MAX_BATCH_TOTAL_TOKENS"])
        rng = random.Random(0)
        words = ["river", "stone", "cloud", "apple", "window", "garden", "silver", "market",
                 "engine", "forest", "letter", "candle", "harbor", "pencil", "orange", "valley"]
        filled = 0
        while filled < total * 1.2:
            prompt = " ".join(rng.choice(words) for _ in range(args.fill_prompt_tokens))
            r = requests.post(base + "/generate", json={
                "inputs": prompt, "parameters": {"max_new_tokens": 1, "details": True,
                                                 "decoder_input_details": False}}, timeout=600)
            r.raise_for_status()
            n = len(requests.post(base + "/tokenize", json={"inputs": prompt}).json())
            filled += n
        print(f"after {filled} prompt tokens (pool {total}): {mem(proc.pid)}")
    finally:
        proc.terminate()
        proc.wait(timeout=120)


if __name__ == "__main__":
    main()

"""Faults while weights are fetched and converted (issue 24): the launcher killed with SIGKILL in the
middle of a Hub download and in the middle of a PyTorch .bin conversion, then started again; and
a disk that fills up during a conversion. The next start must succeed and serve exactly what a
clean start serves, and no partial file may ever sit under a final name (a blob in blobs/, a
snapshot entry, model.safetensors): those are what a later start trusts as complete."""

import contextlib
import hashlib
import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from conftest import LAUNCHER, ROOT, free_port, launch_server
from fake_hub import FakeHub
from test_hub import HF_VARS, TINY_DIR, checkpoint_files, hub_env, repo_dir, tiny_tokenizer_files
from torch_zip import write_torch_bin

PROMPTS = ["the cat", "a b c d", "hello world"]


def greedy_texts(server) -> list:
    out = []
    for prompt in PROMPTS:
        r = server.post("/generate", {"inputs": prompt, "parameters": {"max_new_tokens": 8}})
        assert r.status_code == 200, r.text
        out.append(r.json()["generated_text"])
    return out


def serve(hub, cache, **env):
    return launch_server(["--model-id", "org/m"], env=hub_env(hub, cache, **env),
                         use_flags_for_port=False, timeout=180)


@contextlib.contextmanager
def started(hub, cache, log: Path):
    """A launcher serving org/m from `cache`, not waited for: the test kills it."""
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(LAUNCHER), "--model-id", "org/m", "--hostname", "127.0.0.1",
                                 "--port", str(free_port())], env=hub_env(hub, cache),
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def wait_for(predicate, proc, log: Path, timeout=120.0, interval=0.001):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"launcher exited early:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out:\n{log.read_text()[-3000:]}"
        time.sleep(interval)


# ---- kill -9 during a download -------------------------------------------------------------


def test_kill_9_during_a_download_then_restart(tmp_path):
    files = checkpoint_files(TINY_DIR)
    weights = files["model.safetensors"]
    blob = hashlib.sha256(weights).hexdigest()
    with FakeHub() as hub:
        sha = hub.add_repo("org/m").commit(files)
        with serve(hub, tmp_path / "clean") as server:
            expected = greedy_texts(server)

        cache = tmp_path / "cache"
        blobs = repo_dir(cache, "org/m") / "blobs"
        partial = blobs / (blob + ".incomplete")
        snapshot_entry = repo_dir(cache, "org/m") / "snapshots" / sha / "model.safetensors"
        hub.throttle["model.safetensors"] = 60_000  # bytes/s: about ten seconds for the file
        log = tmp_path / "killed.log"
        with started(hub, cache, log) as proc:
            wait_for(lambda: partial.exists() and partial.stat().st_size >= 30_000, proc, log,
                     interval=0.02)
            proc.kill()
        # What the killed download left: a partial file under its temporary name only.
        left = partial.stat().st_size
        assert 0 < left < len(weights)
        assert weights.startswith(partial.read_bytes())
        assert not (blobs / blob).exists()
        assert not snapshot_entry.exists() and not snapshot_entry.is_symlink()
        assert not (repo_dir(cache, "org/m") / "refs" / "main").exists()

        del hub.throttle["model.safetensors"]
        with serve(hub, cache) as server:
            assert greedy_texts(server) == expected
            assert f"Resuming model.safetensors at byte {left}" in server.stdout() + server.stderr()
        assert hub.gets("model.safetensors")[-1]["range"] == f"bytes={left}-"
        assert (blobs / blob).read_bytes() == weights
        assert not partial.exists()


# ---- kill -9 during a .bin conversion ------------------------------------------------------

BIG = dict(hidden=1024, intermediate=4096, layers=2, heads=16, vocab=384)  # ~130 MB of float32


def big_llama_bin(path: Path) -> dict:
    """A seeded random Llama written as pytorch_model.bin (large enough that converting it takes a
    while: the kill lands inside); returns its config.json."""
    h, inter, heads, vocab = BIG["hidden"], BIG["intermediate"], BIG["heads"], BIG["vocab"]
    rng = np.random.default_rng(24)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.05).astype(np.float32)

    tensors = {"model.embed_tokens.weight": w(vocab, h), "model.norm.weight": np.ones(h, "f4"),
               "lm_head.weight": w(vocab, h)}  # fmt: skip
    for i in range(BIG["layers"]):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[p + f"self_attn.{name}.weight"] = w(h, h)
        tensors[p + "mlp.gate_proj.weight"] = w(inter, h)
        tensors[p + "mlp.up_proj.weight"] = w(inter, h)
        tensors[p + "mlp.down_proj.weight"] = w(h, inter)
        tensors[p + "input_layernorm.weight"] = np.ones(h, "f4")
        tensors[p + "post_attention_layernorm.weight"] = np.ones(h, "f4")
    write_torch_bin(path, tensors)
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
            "hidden_size": h, "intermediate_size": inter, "num_hidden_layers": BIG["layers"],
            "num_attention_heads": heads, "num_key_value_heads": heads,
            "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "torch_dtype": "float32", "vocab_size": vocab,
            "bos_token_id": 1, "eos_token_id": 2}  # fmt: skip


def big_llama_repo_files(tmp: Path) -> dict:
    """The files of a Hub repository holding big_llama_bin as its only weights."""
    config = big_llama_bin(tmp / "pytorch_model.bin")
    files = {"config.json": json.dumps(config).encode(), **tiny_tokenizer_files(),
             "pytorch_model.bin": (tmp / "pytorch_model.bin").read_bytes()}  # fmt: skip
    (tmp / "pytorch_model.bin").unlink()
    return files


def test_kill_9_during_a_bin_conversion_then_restart(tmp_path):
    files = big_llama_repo_files(tmp_path)
    with FakeHub() as hub:
        sha = hub.add_repo("org/m").commit(files)
        clean = tmp_path / "clean"
        with serve(hub, clean) as server:
            expected = greedy_texts(server)
        clean_bytes = (repo_dir(clean, "org/m") / "snapshots" / sha / "model.safetensors").read_bytes()

        # The kill lands while model.safetensors.tmp is written (or synced); should a slow poll
        # miss that window, the conversion finished and the try is repeated on a fresh cache.
        for attempt in range(3):
            cache = tmp_path / f"cache{attempt}"
            snapshot = repo_dir(cache, "org/m") / "snapshots" / sha
            tmp, final = snapshot / "model.safetensors.tmp", snapshot / "model.safetensors"
            log = tmp_path / f"killed{attempt}.log"
            with started(hub, cache, log) as proc:
                wait_for(tmp.exists, proc, log)
                proc.kill()
            if not final.exists():
                break
        assert tmp.exists() and not final.exists(), "the kill never landed inside the conversion"
        assert tmp.stat().st_size < len(clean_bytes)

        with serve(hub, cache) as server:
            assert greedy_texts(server) == expected
            assert "Converting PyTorch weights to safetensors" in server.stdout() + server.stderr()
        assert final.read_bytes() == clean_bytes
        assert not tmp.exists()


def test_replicas_sharing_a_cache_convert_it_once(tmp_path):
    """Three launchers start at once on one cache that huggingface_hub filled (no safetensors
    yet), as replicas on a shared volume do: each used to write the same model.safetensors.tmp,
    truncating the others', and two of the three failed to start ("cannot complete
    model.safetensors.tmp: No such file or directory"). Now they take turns: one converts, the
    others wait for it and find its file current."""
    from huggingface_hub import snapshot_download

    files = big_llama_repo_files(tmp_path)
    with FakeHub() as hub:
        sha = hub.add_repo("org/m").commit(files)
        clean = tmp_path / "clean"
        p = subprocess.run([str(LAUNCHER), "download-weights", "org/m"], env=hub_env(hub, clean),
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        clean_bytes = (repo_dir(clean, "org/m") / "snapshots" / sha / "model.safetensors").read_bytes()

        cache = tmp_path / "shared"
        snapshot_download("org/m", endpoint=hub.url, cache_dir=str(cache))
        replicas = [subprocess.Popen([str(LAUNCHER), "download-weights", "org/m"],
                                     env=hub_env(hub, cache), cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True) for _ in range(3)]  # fmt: skip
        outputs = [r.communicate(timeout=300)[0] for r in replicas]
        assert [r.returncode for r in replicas] == [0, 0, 0], outputs
        assert not [out for out in outputs if " error " in out], outputs
    snapshot = repo_dir(cache, "org/m") / "snapshots" / sha
    assert (snapshot / "model.safetensors").read_bytes() == clean_bytes
    assert not (snapshot / "model.safetensors.tmp").exists()


# ---- a full disk during a conversion -------------------------------------------------------


def small_bin_folder(folder: Path) -> dict:
    """A folder WEIGHTS_CACHE_OVERRIDE can point at, with an 8 MiB pytorch_model.bin: enough to
    hit a few MiB of file-size limit or free space. (Its config is never loaded: the conversion
    runs in download-weights, which converts as TGI's does.)"""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {"a": np.full((1024, 1024), 1.5, "f4"), "b": np.arange(1 << 20, dtype="f4")}
    write_torch_bin(folder / "pytorch_model.bin", tensors)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    return tensors


def local_env(tmp: Path, **extra) -> dict:
    """No Hub: WEIGHTS_CACHE_OVERRIDE names the folder."""
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
    env.update(HUGGINGFACE_HUB_CACHE=str(tmp / "hub-cache"), HF_HOME=str(tmp / "hf-home"),
               HF_HUB_OFFLINE="1", **extra)  # fmt: skip
    return env


def convert(folder: Path, preexec_fn=None) -> subprocess.CompletedProcess:
    env = local_env(folder.parent, WEIGHTS_CACHE_OVERRIDE=str(folder))
    p = subprocess.run([str(LAUNCHER), "download-weights", "org/m"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)
    p.output = p.stdout + p.stderr
    return p


def assert_nothing_half_written(folder: Path, output: str, reason: str):
    assert "model.safetensors: cannot write " in output, output
    assert f"model.safetensors.tmp: {reason}" in output, output
    assert "the partial file was removed" in output, output
    assert sorted(p.name for p in folder.iterdir()) == \
        ["config.json", "pytorch_model.bin", "tokenizer.json"]  # fmt: skip


def test_a_file_size_limit_during_conversion_fails_cleanly_and_names_the_file(tmp_path):
    """RLIMIT_FSIZE makes a write past it fail as a full disk does (EFBIG instead of ENOSPC; the
    launcher ignores SIGXFSZ, which would otherwise kill it with the temporary left behind)."""
    folder = tmp_path / "model"
    tensors = small_bin_folder(folder)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, resource.RLIM_INFINITY))

    p = convert(folder, preexec_fn=limit)
    assert p.returncode == 1, p.output
    assert_nothing_half_written(folder, p.output, "File too large")
    # Room again: the next start converts it whole.
    p = convert(folder)
    assert p.returncode == 0, p.output
    converted = load_file(str(folder / "model.safetensors"))
    assert converted.keys() == tensors.keys()
    assert all(np.array_equal(converted[k], tensors[k]) for k in tensors)


def test_a_full_disk_during_conversion_fails_cleanly_and_names_the_file(tmp_path):
    """A real full disk: a 12 MiB tmpfs holding the 8 MiB checkpoint, mounted in a private mount
    namespace (`unshare -m`, so it vanishes with the command). Needs root with CAP_SYS_ADMIN;
    skipped where mounting is not allowed (the file-size-limit test above covers the same path)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    source = tmp_path / "source"
    small_bin_folder(source)
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs",
                            "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    # One shell in the namespace: mount, copy, convert, then list what is left (the mount goes
    # away with the namespace).
    script = (f"mount -t tmpfs -o size=12m tmpfs {mount} && cp {source}/* {mount}/ && "
              f"{{ WEIGHTS_CACHE_OVERRIDE={mount} {LAUNCHER} download-weights org/m; "
              f"echo \"rc=$?\"; ls -1 {mount}; }}")  # fmt: skip
    env = local_env(tmp_path)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "rc=1" in out, out
    assert "model.safetensors: cannot write " in out, out
    assert "model.safetensors.tmp: No space left on device" in out, out
    assert "the partial file was removed" in out, out
    listing = p.stdout.split("rc=1", 1)[1].split()
    assert sorted(listing) == ["config.json", "pytorch_model.bin", "tokenizer.json"], out

"""GGUF repositories on the Hub, and GGUF models split by gguf-split, against the fake Hub.

The default model (models/SmolLM2-135M-Instruct.Q4_1.gguf) is published as `org/SmolLM2-GGUF`
beside files a server must never fetch (a projector, an imatrix, a README), and as
`org/SmolLM2-split-GGUF`, split into 3 shards by gguf-py's own writer
(scripts/fixtures/split_gguf.py, llama.cpp's gguf-split format). Covered: the file chosen by
`:QUANT` / `--gguf-file` / llama.cpp's default, download-weights fetching only that file (every
shard of a split one), offline reuse of the cache, the errors that list the repository's GGUF
files, and the same greedy tokens from the local file, the Hub copy and the split copy.
"""

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import LAUNCHER, MODEL, ROOT, launch_server
from fake_hub import FakeHub
from test_hub import HF_VARS

SPLIT_SCRIPT = ROOT / "scripts/fixtures/split_gguf.py"
SINGLE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHARDS = [f"SmolLM2-135M-Instruct.Q4_1-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
NEVER_FETCHED = ["README.md", "mmproj-SmolLM2-f16.gguf", "SmolLM2-135M-Instruct.imatrix.gguf"]


def split_gguf(src: Path, out: Path, shards: int) -> list:
    spec = importlib.util.spec_from_file_location("split_gguf", SPLIT_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.split_gguf(src, out, shards)


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("split")
    paths = split_gguf(Path(MODEL), out, 3)
    assert [p.name for p in paths] == SHARDS
    return out


@pytest.fixture(scope="module")
def hub(split_dir):
    hub = FakeHub()
    single = Path(MODEL).read_bytes()
    hub.main_sha = hub.add_repo("org/SmolLM2-GGUF").commit({
        SINGLE: single, NEVER_FETCHED[0]: b"# GGUF\n", NEVER_FETCHED[1]: b"\0" * 64,
        NEVER_FETCHED[2]: b"\0" * 64})
    files = {name: (split_dir / name).read_bytes() for name in SHARDS}
    files["README.md"] = b"# split\n"
    hub.split_sha = hub.add_repo("org/SmolLM2-split-GGUF").commit(files)
    with hub:
        yield hub


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def hub_env(hub, cache, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS + ("GGUF_FILE",)}
    env.update(HF_ENDPOINT=hub.url, HUGGINGFACE_HUB_CACHE=str(cache),
               HF_HOME=str(cache.parent / "hf-home"), HUB_RETRY_BACKOFF_MS="20")
    env.update(extra)
    return env


def download(hub, cache, *args, **env) -> subprocess.CompletedProcess:
    p = subprocess.run([str(LAUNCHER), "download-weights", *args], env=hub_env(hub, cache, **env),
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    p.output = p.stdout + p.stderr
    return p


def snapshot(cache: Path, repo: str, sha: str) -> Path:
    return cache / ("models--" + repo.replace("/", "--")) / "snapshots" / sha


def fetched(hub) -> set:
    return {r["file"] for r in hub.file_requests() if r["method"] == "GET"}


def greedy_ids(server) -> list:
    r = server.post("/generate", {"inputs": "The capital of France is",
                                  "parameters": {"max_new_tokens": 16, "details": True}})
    assert r.status_code == 200, r.text
    return [t["id"] for t in r.json()["details"]["tokens"]]


# ---- which file ------------------------------------------------------------------------------


def test_the_quant_tag_fetches_only_its_file(hub, cache):
    hub.requests.clear()
    p = download(hub, cache, "org/SmolLM2-GGUF:q4_1")
    assert p.returncode == 0, p.output
    assert fetched(hub) == {SINGLE}
    snap = snapshot(cache, "org/SmolLM2-GGUF", hub.main_sha)
    assert sorted(f.name for f in snap.iterdir()) == [SINGLE]
    assert (snap / SINGLE).read_bytes() == Path(MODEL).read_bytes()
    # The same file again: from the cache, nothing fetched.
    hub.requests.clear()
    again = download(hub, cache, "org/SmolLM2-GGUF", "--gguf-file", SINGLE.upper())
    assert again.returncode == 0, again.output
    assert "Files are already present on the host" in again.output
    assert fetched(hub) == set()


def test_without_a_tag_llama_cpps_default_choice(hub, cache):
    # No Q4_K_M or Q8_0 file: the first model file, never the projector or the imatrix.
    p = download(hub, cache, "org/SmolLM2-GGUF")
    assert p.returncode == 0, p.output
    assert f"Serving the GGUF file {SINGLE} of org/SmolLM2-GGUF" in p.output


@pytest.mark.parametrize("args, expected", [
    (["org/SmolLM2-GGUF:Q5_K_M"], "no GGUF file of org/SmolLM2-GGUF matches the quant Q5_K_M"),
    (["org/SmolLM2-GGUF", "--gguf-file", "x.gguf"], "--gguf-file x.gguf: no such file in"),
    (["org/SmolLM2-split-GGUF", "--gguf-file", SHARDS[1]],
     f"is shard 2 of 3 of a split model: name the first shard, {SHARDS[0]}"),
])
def test_no_match_lists_the_repositorys_gguf_files(hub, cache, args, expected):
    p = download(hub, cache, *args)
    assert p.returncode == 1, p.output
    assert expected in p.output
    if "split" not in args[0]:
        assert f"{SINGLE}, {NEVER_FETCHED[2]}, {NEVER_FETCHED[1]}" in p.output


def test_the_env_var_names_the_file(hub, cache):
    p = download(hub, cache, "org/SmolLM2-GGUF", GGUF_FILE="nope.gguf")
    assert p.returncode == 1 and "--gguf-file nope.gguf: no such file" in p.output, p.output


# ---- split models ----------------------------------------------------------------------------


def test_a_split_model_brings_every_shard_and_serves_offline(hub, cache):
    hub.requests.clear()
    p = download(hub, cache, "org/SmolLM2-split-GGUF")
    assert p.returncode == 0, p.output
    assert fetched(hub) == set(SHARDS)
    offline = download(hub, cache, "org/SmolLM2-split-GGUF", HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.output
    # A shard gone from the cache is named.
    snap = snapshot(cache, "org/SmolLM2-split-GGUF", hub.split_sha)
    (snap / SHARDS[2]).resolve().unlink()
    broken = download(hub, cache, "org/SmolLM2-split-GGUF", HF_HUB_OFFLINE="1")
    assert broken.returncode == 1
    assert f"is missing: {SHARDS[2]}" in broken.output, broken.output


def test_a_local_split_with_a_shard_missing_names_it(split_dir, tmp_path):
    for name in SHARDS[:2]:
        shutil.copy(split_dir / name, tmp_path / name)
    p = subprocess.run([str(LAUNCHER), "--model-id", str(tmp_path / SHARDS[0]), "--port", "1"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0
    assert f"{tmp_path / SHARDS[2]}: missing shard 3 of 3" in p.stdout + p.stderr


def test_the_hub_copy_and_the_split_copy_generate_the_local_files_tokens(hub, cache, split_dir):
    with launch_server(["--model-id", MODEL], use_flags_for_port=False) as server:
        expected = greedy_ids(server)
    assert len(expected) == 16
    assert download(hub, cache, "org/SmolLM2-GGUF:Q4_1").returncode == 0
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    with launch_server(["--model-id", "org/SmolLM2-GGUF:Q4_1"], env=env,
                       use_flags_for_port=False) as server:
        assert greedy_ids(server) == expected
        info = server.get("/info").json()
        assert info["model_id"] == "org/SmolLM2-GGUF:Q4_1"
        assert info["model_sha"] == hub.main_sha
    with launch_server(["--model-id", "org/SmolLM2-split-GGUF"], env=hub_env(hub, cache),
                       use_flags_for_port=False) as server:
        assert greedy_ids(server) == expected
    with launch_server(["--model-id", str(split_dir / SHARDS[0])],
                       use_flags_for_port=False) as server:
        assert greedy_ids(server) == expected

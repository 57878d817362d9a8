"""Weights from the Hub and the huggingface_hub cache, against a local fake Hub (fake_hub.py).

A tiny checkpoint of build/test-models (`make fixtures-test`), with a small byte-level tokenizer made
here, is published as `org/tiny`; `text-generation-launcher download-weights` and the server fetch
it into a temp HUGGINGFACE_HUB_CACHE through HF_ENDPOINT. Covered: the cache layout, resume with a
Range request, the integrity check, offline reuse, branch/tag/commit revisions, 401/403/404 messages,
the free-space refusal, interoperability with the huggingface_hub library both ways, and serving
`--model-id org/tiny` with /info naming the repository and commit.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import LAUNCHER, ROOT, launch_server
from fake_hub import FakeHub, git_blob_sha1

TINY_DIR = ROOT / "build/test-models/llama_mha_untied"
SHARDED_DIR = ROOT / "build/test-models/llama_gqa_tied_sharded"
VOCAB_SIZE = 384  # the tiny checkpoints' vocab_size
HF_VARS = (
    "HF_TOKEN",
    "HF_API_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_ENDPOINT",
    "WEIGHTS_CACHE_OVERRIDE",
    "REVISION",
)


# ---- the tiny model and its tokenizer -------------------------------------------------------


def _bytes_to_unicode() -> dict:
    """GPT-2's byte -> printable character table (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiny_tokenizer_files() -> dict:
    """A byte-level BPE tokenizer with exactly VOCAB_SIZE tokens (specials, 256 bytes, merges)."""
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for _, ch in sorted(_bytes_to_unicode().items()):
        vocab[ch] = len(vocab)
    merges = []
    letters = "etaoinshrdlucmfwypvbgk"
    for a in letters:
        for b in letters:
            if len(vocab) < VOCAB_SIZE:
                merges.append(f"{a} {b}")
                vocab[a + b] = len(vocab)
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, t in enumerate(specials)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
              "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": False}
    return {"tokenizer.json": json.dumps(tokenizer).encode(),
            "tokenizer_config.json": json.dumps(config).encode()}


def checkpoint_files(folder: Path) -> dict:
    if not (folder / "config.json").exists():
        pytest.skip(f"{folder} missing: run `make fixtures-test`")
    files = {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}
    files.update(tiny_tokenizer_files())
    return files


@pytest.fixture(scope="module")
def tiny_files() -> dict:
    files = checkpoint_files(TINY_DIR)
    # Files a server does not need: never downloaded.
    files["README.md"] = b"# tiny\n"
    files["training_args.bin"] = b"\0" * 64
    files["original/consolidated.safetensors"] = b"\0" * 64
    return files


@pytest.fixture
def hub(tiny_files):
    hub = FakeHub()
    tiny = hub.add_repo("org/tiny")
    hub.main_sha = tiny.commit(tiny_files, tags=["v1.0"])
    changed = dict(tiny_files)
    changed["generation_config.json"] = b'{"bos_token_id": 1, "eos_token_id": 2, "dev": true}'
    hub.dev_sha = tiny.commit(changed, ref="dev")
    tiny.refs["refs/pr/1"] = hub.dev_sha
    hub.add_repo("org/private", private=True).commit(tiny_files)
    hub.add_repo("org/gated", gated=True, granted_tokens={"hf_granted"}).commit(tiny_files)
    with hub:
        yield hub


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def hub_env(hub, cache, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
    env.update(HF_ENDPOINT=hub.url, HUGGINGFACE_HUB_CACHE=str(cache),
               HF_HOME=str(cache.parent / "hf-home"), HUB_RETRY_BACKOFF_MS="20")
    env.update(extra)
    return env


def download(hub, cache, *args, timeout=60, **env) -> subprocess.CompletedProcess:
    """`text-generation-launcher download-weights ...`; .output = stdout + stderr."""
    p = subprocess.run([str(LAUNCHER), "download-weights", *args], env=hub_env(hub, cache, **env),
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    p.output = p.stdout + p.stderr
    return p


def repo_dir(cache: Path, repo="org/tiny") -> Path:
    return cache / ("models--" + repo.replace("/", "--"))


def etag_of(name: str, data: bytes) -> str:
    lfs = name.endswith((".safetensors", ".bin"))
    return hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)


WANTED = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
          "tokenizer_config.json"]


# ---- download, layout, resume, integrity ----------------------------------------------------


def test_download_weights_fills_the_cache_as_huggingface_hub(hub, cache, tiny_files):
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    repo = repo_dir(cache)
    assert (repo / "refs/main").read_text() == hub.main_sha  # verbatim, no newline
    snapshot = repo / "snapshots" / hub.main_sha
    assert sorted(os.listdir(snapshot)) == WANTED  # no README, training args or subfolders
    for name in WANTED:
        link = snapshot / name
        assert link.is_symlink()
        assert os.readlink(link) == f"../../blobs/{etag_of(name, tiny_files[name])}"
        assert link.read_bytes() == tiny_files[name]
    assert not list((repo / "blobs").glob("*.incomplete"))
    assert "Download file: model.safetensors" in p.output
    assert f"Downloaded {snapshot}/model.safetensors in 0:00:0" in p.output
    # The second time nothing moves.
    before = len(hub.file_requests())
    again = download(hub, cache, "org/tiny")
    assert again.returncode == 0, again.output
    assert "Files are already present on the host. Skipping download." in again.output
    assert len(hub.file_requests()) == before


def test_resume_after_an_interrupted_transfer(hub, cache, tiny_files):
    weights = tiny_files["model.safetensors"]
    hub.drop_after["model.safetensors"] = 100_000  # the first GET dies after 100 kB
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    ranges = [r["range"] for r in hub.gets("model.safetensors")]
    assert ranges == [None, "bytes=100000-"], ranges
    blob = repo_dir(cache) / "blobs" / hashlib.sha256(weights).hexdigest()
    assert blob.read_bytes() == weights


def test_resume_of_a_partial_file_left_by_an_earlier_run(hub, cache, tiny_files):
    weights = tiny_files["model.safetensors"]
    blob = repo_dir(cache) / "blobs" / hashlib.sha256(weights).hexdigest()
    blob.parent.mkdir(parents=True)
    Path(str(blob) + ".incomplete").write_bytes(weights[:12345])
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    assert [r["range"] for r in hub.gets("model.safetensors")] == ["bytes=12345-"]
    assert blob.read_bytes() == weights
    assert not Path(str(blob) + ".incomplete").exists()


def test_a_server_that_ignores_range_restarts_the_file(hub, cache, tiny_files):
    weights = tiny_files["model.safetensors"]
    blob = repo_dir(cache) / "blobs" / hashlib.sha256(weights).hexdigest()
    blob.parent.mkdir(parents=True)
    Path(str(blob) + ".incomplete").write_bytes(b"\xff" * 5000)  # not even the right bytes
    hub.ignore_range.add("model.safetensors")
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    assert [r["range"] for r in hub.gets("model.safetensors")] == ["bytes=5000-"]
    assert blob.read_bytes() == weights


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_integrity_failure_leaves_no_file_taken_for_complete(hub, cache, tiny_files, name):
    hub.corrupt.add(name)
    p = download(hub, cache, "org/tiny")
    assert p.returncode != 0
    assert f"Integrity check failed for {name} of org/tiny" in p.output
    assert ("sha256" if name.endswith(".safetensors") else "git blob sha1") in p.output
    repo = repo_dir(cache)
    etag = etag_of(name, tiny_files[name])
    assert not (repo / "blobs" / etag).exists()
    assert not (repo / "snapshots" / hub.main_sha / name).exists()
    assert not (repo / "refs" / "main").exists()
    # Whatever else is left is complete and verified, or an .incomplete to resume.
    for blob in (repo / "blobs").iterdir():
        assert blob.name.endswith(".incomplete") or blob.name in {
            etag_of(n, d) for n, d in tiny_files.items()}


def test_progress_is_logged_during_a_slow_transfer(hub, cache):
    hub.throttle["model.safetensors"] = 300_000  # bytes/s: about two seconds
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    lines = [line for line in p.output.splitlines() if "Download: [" in line]
    assert lines, p.output
    assert "% (" in lines[0] and "/s -- ETA: " in lines[0], lines[0]


# ---- offline and the cache ------------------------------------------------------------------


def test_offline_reuses_the_cache_and_names_missing_files(hub, cache, tiny_files):
    assert download(hub, cache, "org/tiny").returncode == 0
    hub.stop()
    p = download(hub, cache, "org/tiny", HF_HUB_OFFLINE="1")
    assert p.returncode == 0, p.output
    assert "Files are already present on the host. Skipping download." in p.output
    # A blob gone (cleaned by hand): offline says exactly which file is missing.
    etag = etag_of("tokenizer.json", tiny_files["tokenizer.json"])
    (repo_dir(cache) / "blobs" / etag).unlink()
    p = download(hub, cache, "org/tiny", HF_HUB_OFFLINE="true")
    assert p.returncode != 0
    assert "HF_HUB_OFFLINE is set" in p.output
    assert "is missing: tokenizer.json." in p.output, p.output
    p = download(hub, cache, "org/tiny", "--revision", "dev", HF_HUB_OFFLINE="yes")
    assert p.returncode != 0
    assert "revision 'dev' of org/tiny is not in the cache" in p.output, p.output


def test_unreachable_hub_falls_back_to_the_cache_or_says_why(hub, cache):
    url = hub.url
    assert download(hub, cache, "org/tiny").returncode == 0
    hub.stop()
    p = download(hub, cache, "org/tiny", HF_ENDPOINT=url)
    assert p.returncode == 0, p.output
    assert "Could not retrieve model info from the Hugging Face hub" in p.output
    p = download(hub, cache.parent / "empty-cache", "org/tiny", HF_ENDPOINT=url)
    assert p.returncode != 0
    assert "network error" in p.output and "Couldn't connect to server" in p.output, p.output
    assert "failed after 5 tries" in p.output


# ---- revisions ------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["dev", "v1.0", "commit", "refs/pr/1"])
def test_revision_resolution(hub, cache, revision):
    expected = {"dev": hub.dev_sha, "v1.0": hub.main_sha, "refs/pr/1": hub.dev_sha}
    rev = hub.dev_sha if revision == "commit" else revision
    sha = expected.get(revision, hub.dev_sha)
    p = download(hub, cache, "org/tiny", "--revision", rev)
    assert p.returncode == 0, p.output
    snapshot = repo_dir(cache) / "snapshots" / sha
    assert f"(commit {sha})" in p.output
    dev = b'"dev": true' in (snapshot / "generation_config.json").read_bytes()
    assert dev == (sha == hub.dev_sha)
    ref = repo_dir(cache) / "refs" / rev
    if revision == "commit":
        assert not ref.exists()  # a commit needs no ref
    else:
        assert ref.read_text() == sha
    # Offline, the ref (or the commit) finds the same snapshot.
    hub.stop()
    p = download(hub, cache, "org/tiny", "--revision", rev, HF_HUB_OFFLINE="1")
    assert p.returncode == 0, p.output
    assert f"(commit {sha})" in p.output


# ---- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "repo, token, expected",
    [
        ("org/private", None, ["401", "no token was sent", "set HF_TOKEN"]),
        ("org/private", "hf_wrong", ["401", "HF_TOKEN is wrong or expired"]),
        ("org/gated", None, ["gated repo org/gated", "accept the licence on the model page",
                             "/org/gated", "HF_TOKEN"]),
        ("org/gated", "hf_good", ["gated repo org/gated (403 GatedRepo)",
                                  "accept the licence on the model page"]),
        ("org/missing", "hf_good", ["Repository org/missing not found", "404 RepoNotFound"]),
    ],
)
def test_access_errors(hub, cache, repo, token, expected):
    env = {"HF_TOKEN": token} if token else {}
    p = download(hub, cache, repo, **env)
    assert p.returncode != 0
    for part in expected:
        assert part in p.output, p.output
    assert not hub.gets("model.safetensors")


def test_revision_not_found(hub, cache):
    p = download(hub, cache, "org/tiny", "--revision", "nope")
    assert p.returncode != 0
    assert "Revision 'nope' not found in org/tiny (404 RevisionNotFound)" in p.output, p.output


def test_file_listed_but_not_served(hub, cache):
    hub.hidden.add("tokenizer_config.json")
    p = download(hub, cache, "org/tiny")
    assert p.returncode != 0
    assert "File tokenizer_config.json not found in org/tiny at revision main (404 " \
           "EntryNotFound)" in p.output, p.output


def test_file_metadata_from_head_requests(hub, cache, tiny_files):
    hub.api_metadata = False  # the model info names files only: HEAD gives etags and sizes
    p = download(hub, cache, "org/tiny")
    assert p.returncode == 0, p.output
    heads = {r["path"].rsplit("/", 1)[1] for r in hub.requests if r["method"] == "HEAD"}
    assert heads == set(WANTED)
    snapshot = repo_dir(cache) / "snapshots" / hub.main_sha
    for name in WANTED:
        assert os.readlink(snapshot / name) == f"../../blobs/{etag_of(name, tiny_files[name])}"


@pytest.mark.parametrize("repo, token", [("org/private", "hf_good"), ("org/gated", "hf_granted")])
def test_the_right_token_opens_private_and_gated_repos(hub, cache, repo, token):
    p = download(hub, cache, repo, HF_API_TOKEN=token)  # the launcher's HF_API_TOKEN counts too
    assert p.returncode == 0, p.output
    assert all(r["authorization"] == f"Bearer {token}" for r in hub.requests
               if not r["path"].startswith("/cdn/"))


def test_not_enough_disk_space_refuses_before_any_transfer(hub, cache):
    hub.api_sizes["model.safetensors"] = 10**15
    p = download(hub, cache, "org/tiny")
    assert p.returncode != 0
    assert "Not enough free disk space" in p.output
    assert "needs 1.00 PB" in p.output, p.output
    assert not [r for r in hub.requests if r["method"] == "GET" and "/resolve/" in r["path"]]
    assert not hub.gets("model.safetensors")
    assert not repo_dir(cache).exists()  # nothing a cache scan would call corrupted


def test_pytorch_weights_count_twice_for_the_conversion(hub, cache):
    files = checkpoint_files(TINY_DIR)
    files["pytorch_model.bin"] = files.pop("model.safetensors")
    hub.add_repo("org/old").commit(files)
    free = shutil.disk_usage(cache.parent).free
    hub.api_sizes["pytorch_model.bin"] = free * 3 // 4  # fits once, not twice
    p = download(hub, cache, "org/old")
    assert p.returncode != 0
    assert "No safetensors weights found for model org/old at revision main. Downloading PyTorch " \
           "weights." in p.output
    assert "Not enough free disk space" in p.output, p.output
    needed = int(re.search(r"it needs [^(]*\((\d+) bytes\)", p.output).group(1))
    size = free * 3 // 4
    assert 2 * size <= needed < 2 * (size + 10**7), (needed, size)


def test_sharded_weights_follow_the_index(hub, cache):
    files = checkpoint_files(SHARDED_DIR)
    files["consolidated.safetensors"] = b"\0" * 64  # a duplicate the index does not name
    hub.add_repo("org/sharded").commit(files)
    p = download(hub, cache, "org/sharded")
    assert p.returncode == 0, p.output
    snapshot = next((repo_dir(cache, "org/sharded") / "snapshots").iterdir())
    names = sorted(os.listdir(snapshot))
    assert "model-00001-of-00002.safetensors" in names
    assert "model-00002-of-00002.safetensors" in names
    assert "model.safetensors.index.json" in names
    assert "consolidated.safetensors" not in names


# ---- interoperability with the huggingface_hub library --------------------------------------


def test_a_cache_filled_by_huggingface_hub_serves_offline(hub, cache):
    from huggingface_hub import snapshot_download

    path = snapshot_download("org/tiny", endpoint=hub.url, cache_dir=str(cache))
    assert Path(path).name == hub.main_sha
    hub.stop()
    p = download(hub, cache, "org/tiny", HF_HUB_OFFLINE="1")
    assert p.returncode == 0, p.output
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    with launch_server(["--model-id", "org/tiny"], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        r = server.post("/generate", {"inputs": "the cat", "parameters": {"max_new_tokens": 4}})
        assert r.status_code == 200, r.text
        assert "generated_text" in r.json()
        info = server.get("/info").json()
        assert info["model_id"] == "org/tiny"
        assert info["model_sha"] == hub.main_sha


def test_huggingface_hub_reads_a_cache_the_launcher_filled(hub, cache, tiny_files):
    from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download

    assert download(hub, cache, "org/tiny").returncode == 0
    hub.stop()
    info = scan_cache_dir(cache)
    assert not info.warnings
    (repo,) = info.repos
    assert repo.repo_id == "org/tiny"
    (revision,) = repo.revisions
    assert revision.commit_hash == hub.main_sha
    assert revision.refs == frozenset({"main"})
    assert sorted(f.file_name for f in revision.files) == WANTED
    assert repo.size_on_disk == sum(len(tiny_files[n]) for n in WANTED)
    config = hf_hub_download("org/tiny", "config.json", cache_dir=str(cache), local_files_only=True)
    assert Path(config).read_bytes() == tiny_files["config.json"]
    path = snapshot_download("org/tiny", cache_dir=str(cache), local_files_only=True)
    assert Path(path) == repo_dir(cache) / "snapshots" / hub.main_sha


# ---- serving ---------------------------------------------------------------------------------


def test_serving_a_hub_model_id(hub, cache):
    env = hub_env(hub, cache)
    with launch_server(["--model-id", "org/tiny"], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        r = server.post("/generate", {"inputs": "the cat", "parameters": {"max_new_tokens": 4}})
        assert r.status_code == 200, r.text
        assert "generated_text" in r.json()
        info = server.get("/info").json()
        assert info["model_id"] == "org/tiny"
        assert info["model_sha"] == hub.main_sha
        assert info["model_pipeline_tag"] == "text-generation"
        assert "Download file: model.safetensors" in server.stdout() + server.stderr()


# ---- PyTorch .bin checkpoints ---------------------------------------------------------------

BIN_FIXTURE = ROOT / "tests/fixtures/torch_bin/tiny_llama"
BIN_REFERENCE = ROOT / "tests/fixtures/torch_bin/reference/tiny_llama/model.safetensors"


def dry_run(folder: Path, env: dict, *extra) -> subprocess.CompletedProcess:
    """The launcher's --dry-run --json-output on a local folder."""
    return subprocess.run([str(LAUNCHER), "--model-id", str(folder), "--dry-run", "--json-output",
                           *extra], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def dry_run_plan(folder: Path, env: dict, *extra) -> dict:
    """The start plan --dry-run prints, for a folder it accepts."""
    p = dry_run(folder, env, *extra)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def greedy_text(server, prompt: str) -> str:
    r = server.post("/generate", {"inputs": prompt, "parameters": {"max_new_tokens": 12}})
    assert r.status_code == 200, r.text
    return r.json()["generated_text"]


def test_a_pytorch_only_repo_is_converted_once_and_serves_as_its_safetensors_twin(hub, cache):
    """A transformers Llama saved with torch.save (scripts/fixtures/make_torch_bin_fixtures.py),
    served from the Hub: converted to model.safetensors in the snapshot, then the same greedy text
    as the same weights published as safetensors; a second start converts nothing."""
    common = {"config.json": (BIN_FIXTURE / "config.json").read_bytes(), **tiny_tokenizer_files()}
    hub.add_repo("org/old").commit({**common, "pytorch_model.bin":
                                    (BIN_FIXTURE / "pytorch_model.bin").read_bytes()})
    hub.add_repo("org/new").commit({**common, "model.safetensors": BIN_REFERENCE.read_bytes()})
    env = hub_env(hub, cache)
    prompts = ["the cat", "a b c d", "hello world"]
    with launch_server(["--model-id", "org/new"], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        expected = [greedy_text(server, p) for p in prompts]
    with launch_server(["--model-id", "org/old"], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        assert [greedy_text(server, p) for p in prompts] == expected
        log = server.stdout() + server.stderr()
        assert "Converting PyTorch weights to safetensors" in log
    snapshot = next((repo_dir(cache, "org/old") / "snapshots").iterdir())
    converted = snapshot / "model.safetensors"
    assert converted.is_file() and not converted.is_symlink()
    assert (snapshot / "pytorch_model.bin").is_symlink()
    assert len(set(expected)) > 1, "degenerate model: every prompt gave the same text"

    offline = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    with launch_server(["--model-id", "org/old"], env=offline, use_flags_for_port=False,
                       timeout=60) as server:
        assert [greedy_text(server, p) for p in prompts] == expected
        assert "Converting" not in server.stdout() + server.stderr()


def local_bin_fixture(folder: Path, weights_name: str, weights: Path) -> Path:
    """A local model folder of the .bin fixture's config, the tiny tokenizer and `weights`."""
    folder.mkdir()
    for name, data in {"config.json": (BIN_FIXTURE / "config.json").read_bytes(),
                       weights_name: weights.read_bytes(), **tiny_tokenizer_files()}.items():  # fmt: skip
        (folder / name).write_bytes(data)
    return folder


def test_a_local_pytorch_only_folder_is_converted_beside_its_bin(tmp_path, hub, cache):
    """MODEL_ID a local folder with only pytorch_model.bin (as TGI's download-weights converts a
    local model's .bin files): model.safetensors is written beside it, and the folder serves the
    same greedy text as the same weights published as safetensors."""
    folder = local_bin_fixture(tmp_path / "old-local", "pytorch_model.bin",
                               BIN_FIXTURE / "pytorch_model.bin")
    twin = local_bin_fixture(tmp_path / "new-local", "model.safetensors", BIN_REFERENCE)
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    prompts = ["the cat", "a b c d", "hello world"]
    with launch_server(["--model-id", str(twin)], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        expected = [greedy_text(server, p) for p in prompts]
    with launch_server(["--model-id", str(folder)], env=env, use_flags_for_port=False,
                       timeout=60) as server:
        assert [greedy_text(server, p) for p in prompts] == expected
        assert "Converting PyTorch weights to safetensors" in server.stdout() + server.stderr()
    assert (folder / "model.safetensors").is_file()
    assert (folder / "pytorch_model.bin").is_file()  # kept, as TGI keeps it


def test_quantize_at_load_serves_a_float_folder_in_ggml_blocks(tmp_path, hub, cache):
    """QUANTIZE=q8_0 on a float HF folder: the launcher says what it quantized, the plan counts
    the quantized size, and the model serves (tests/model/load_options_test.cc checks the blocks
    against gguf-py's)."""
    folder = local_bin_fixture(tmp_path / "float-local", "model.safetensors", BIN_REFERENCE)
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")

    # 9216 BF16 Linear weights (q 32x32, k and v 16x32, o 32x32, gate and up 64x32, down 32x64;
    # the tied table stays BF16): 18432 bytes, as Q8_0 288 blocks of 34 bytes, 9792.
    float_bytes = dry_run_plan(folder, env)["memory"]["weights_bytes"]
    q8_bytes = dry_run_plan(folder, env, "--quantize", "q8_0")["memory"]["weights_bytes"]
    assert float_bytes - q8_bytes == 18432 - 9792
    with launch_server(["--model-id", str(folder)], env={**env, "QUANTIZE": "q8_0"},
                       use_flags_for_port=False, timeout=60) as server:
        text = greedy_text(server, "the cat")
        assert text
        log = server.stdout() + server.stderr()
        assert re.search(r"--quantize q8_0: quantized [1-9]\d* float weight matrices", log), log


def test_an_fp8_checkpoint_serves_from_its_fp8_bytes(tmp_path, hub, cache):
    """An FP8 checkpoint (transformers' "fp8" layout: E4M3 weights in 32 x 32 blocks with
    weight_scale_inv, made by scripts/fixtures/make_quantized_checkpoints.py) serves with
    QUANTIZE=fp8 as TGI's manifests set it, and without it; the log says what its Linears became
    and the plan counts them at 1 byte a weight (tests/model/quantized_checkpoint_test.cc checks
    the weights the kernels use against transformers' own dequantization and the logits against
    transformers)."""
    folder = tmp_path / "fp8"
    shutil.copytree(ROOT / "tests/fixtures/quantized/fp8_block_32", folder)
    for name, data in tiny_tokenizer_files().items():
        (folder / name).write_bytes(data)
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")

    # 14 Linears of hidden 128, MLP 256 (q 128x128, k and v 64x128, o 128x128, gate/up/down
    # 256x128 each), 2 layers: 2 x 139264 weights, held as the file's FP8 bytes (1 byte each), not
    # dequantized into BF16 (2 bytes).
    memory = dry_run_plan(folder, env)["memory"]
    gptq = dry_run(folder, env, "--quantize", "gptq")
    assert gptq.returncode != 0, gptq
    assert "the checkpoint is quantized with fp8" in gptq.stdout + gptq.stderr, gptq
    texts = []
    for extra in ({"QUANTIZE": "fp8"}, {}):
        with launch_server(["--model-id", str(folder)], env={**env, **extra},
                           use_flags_for_port=False, timeout=60) as server:
            texts.append(greedy_text(server, "the cat"))
            log = server.stdout() + server.stderr()
            assert "fp8: 14 quantized Linears repacked (14 as F8_E4M3)" in log, log
    assert texts[0] and texts[0] == texts[1]
    linear_weights = 2 * (128 * 128 * 2 + 64 * 128 * 2 + 256 * 128 * 3)
    table_bytes = 2 * 384 * 128 * 2  # the BF16 embeddings and LM head
    assert linear_weights + table_bytes <= memory["weights_bytes"], memory
    assert memory["weights_bytes"] < 2 * linear_weights + table_bytes, memory


def test_a_checkpoints_kv_cache_scales_apply_to_an_fp8_cache(tmp_path, hub, cache):
    """A compressed-tensors checkpoint whose KV cache scheme is FP8 (k_scale / v_scale per layer,
    made by scripts/fixtures/make_kv_scale_checkpoint.py) serves: with --kv-cache-dtype
    fp8_e4m3fn the scales apply (tests/model/kv_scales_test.cc checks the logits against
    transformers through the scaled FP8 cache), with the default cache the log says they are not
    used, as TGI and vLLM ignore them there."""
    folder = tmp_path / "kv-scales"
    shutil.copytree(ROOT / "tests/fixtures/kv_scales/kv_scales_fp8", folder)
    for name, data in tiny_tokenizer_files().items():
        (folder / name).write_bytes(data)
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")
    for extra, line in (
        (["--kv-cache-dtype", "fp8_e4m3fn"], "the checkpoint's k_scale / v_scale per layer applied"),
        ([], "the checkpoint's k_scale / v_scale are for an FP8 cache and are not used with fp32"),
    ):
        with launch_server(["--model-id", str(folder), *extra], env=env,
                           use_flags_for_port=False, timeout=60) as server:  # fmt: skip
            assert greedy_text(server, "the cat")
            log = server.stdout() + server.stderr()
            assert line in log, log


def test_quantize_fp8_at_load_serves_a_float_folder_in_fp8(tmp_path, hub, cache):
    """QUANTIZE=fp8 (TGI's value) on a float HF folder: each Linear to E4M3 with one scale a
    tensor, as TGI's fp8_quantize (tests/model/load_options_test.cc checks the bytes and the logits
    against transformers); the launcher says what it quantized and the plan counts 1 byte a
    weight."""
    folder = local_bin_fixture(tmp_path / "float-local", "model.safetensors", BIN_REFERENCE)
    env = hub_env(hub, cache, HF_HUB_OFFLINE="1")

    # 9216 BF16 Linear weights (every Linear's rows a multiple of 16): 18432 bytes, in FP8 9216;
    # fp32 activations, so the KV cache stays fp32 as for float weights.
    fp8_plan = dry_run_plan(folder, env, "--quantize", "fp8")
    float_bytes = dry_run_plan(folder, env)["memory"]["weights_bytes"]
    assert float_bytes - fp8_plan["memory"]["weights_bytes"] == 9216
    assert fp8_plan["kv_cache_dtype"] == "fp32", fp8_plan
    with launch_server(["--model-id", str(folder)], env={**env, "QUANTIZE": "fp8"},
                       use_flags_for_port=False, timeout=60) as server:
        assert greedy_text(server, "the cat")
        log = server.stdout() + server.stderr()
        assert re.search(r"--quantize fp8: quantized [1-9]\d* float weight matrices", log), log


def test_a_malicious_pickle_is_refused_and_runs_nothing(hub, cache):
    marker = Path("/tmp/lm_pwned")
    marker.unlink(missing_ok=True)
    files = {"config.json": (BIN_FIXTURE / "config.json").read_bytes(), **tiny_tokenizer_files(),
             "pytorch_model.bin": (ROOT / "tests/fixtures/torch_bin/malicious/os_system.bin").read_bytes()}
    hub.add_repo("org/evil").commit(files)
    p = download(hub, cache, "org/evil")  # download-weights converts, as TGI's does
    assert p.returncode != 0
    assert "posix" in p.output or "system" in p.output, p.output
    assert not marker.exists()
    snapshot = next((repo_dir(cache, "org/evil") / "snapshots").iterdir())
    assert not (snapshot / "model.safetensors").exists()

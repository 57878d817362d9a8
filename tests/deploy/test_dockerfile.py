"""The Dockerfile against the server it packages, in every `make test` (the image itself is built
and run only by scripts/deploy/test_image.sh, opt-in: IMAGE_TESTS=1).

A library the launcher starts to link, a build package setup.sh starts to need, or a convention
the manifests rely on (entrypoint, PORT, HF_HOME, /data, the embedded model's path) that drifts
fails here rather than in a user's `podman run`. Each check also runs on a broken copy of the
Dockerfile (test_check_catches) to show it can fail.
"""
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LAUNCHER = ROOT / "build/src/app/text-generation-launcher"
# In every Debian base (priority required): never listed in the runtime stage.
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}
# setup.sh packages that only the tests and the host's tooling need.
TEST_ONLY_PACKAGES = {"libgtest-dev", "libgmock-dev", "clang-format", "python3-venv"}


def parse(text: str) -> list[dict]:
    """Stages: {name, base, instructions: [(KEYWORD, argument)]}; continuation lines joined."""
    text = re.sub(r"\\\n", " ", text)
    stages, args = [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            stages.append({"base": words[0], "name": words[2] if len(words) > 2 else None,
                           "instructions": [], "args": args})
        else:
            stages[-1]["instructions"].append((keyword, rest.strip()))
    return stages


def apt_packages(stage) -> set:
    pkgs = set()
    for keyword, rest in stage["instructions"]:
        if keyword == "RUN" and "apt-get install" in rest:
            part = rest.split("apt-get install", 1)[1].split("&&", 1)[0]
            pkgs |= {w for w in part.split() if not w.startswith("-")}
    return pkgs


def env_of(stage) -> dict:
    env = {}
    for keyword, rest in stage["instructions"]:
        if keyword == "ENV":
            for word in shlex.split(rest):
                k, _, v = word.partition("=")
                env[k] = v
    return env


def one(stage, keyword) -> str:
    found = [rest for k, rest in stage["instructions"] if k == keyword]
    assert len(found) == 1, (keyword, found)
    return found[0]


def setup_packages() -> set:
    text = (ROOT / "scripts/setup.sh").read_text()
    block = re.search(r"APT_PACKAGES=\(([^)]*)\)", text).group(1)
    return set(block.split())


def package_of(soname: str) -> str:
    p = subprocess.run(["dpkg", "-S", soname], capture_output=True, text=True)
    pkgs = {line.split(":", 1)[0] for line in p.stdout.splitlines() if "/lib/" in line}
    assert pkgs, f"no Debian package ships {soname}"
    return sorted(pkgs)[0]


def needed_libraries() -> list[str]:
    if not LAUNCHER.exists():
        pytest.fail(f"{LAUNCHER} missing: build first (`make build`)")
    out = subprocess.run(["readelf", "-d", str(LAUNCHER)], capture_output=True, text=True,
                         check=True).stdout
    # The image is built with LM_CUDA=OFF; the host's build links the CUDA runtime and cuBLAS
    # (the CUDA runner) when nvcc exists.
    return [n for n in re.findall(r"\[(.+?)\]", "\n".join(
        ln for ln in out.splitlines() if "NEEDED" in ln))
        if not n.startswith(("libcudart", "libcublas"))]


# ---- the checks, each a function of the Dockerfile's text --------------------------------------


def check_stages_and_base(text):
    stages = parse(text)
    assert [s["name"] for s in stages] == ["build", "runtime"], "multi-stage: build, runtime"
    assert all(s["base"] == "${BASE_IMAGE}" for s in stages), "both stages on the BASE_IMAGE arg"
    assert stages[0]["args"].get("BASE_IMAGE") == "debian:bookworm-slim"


def check_runtime_conventions(text):
    runtime = parse(text)[1]
    assert json.loads(one(runtime, "ENTRYPOINT")) == ["text-generation-launcher"]
    env = env_of(runtime)
    assert env.get("PORT") == "80" and env.get("HF_HOME") == "/data", env
    assert one(runtime, "VOLUME") == "/data" and one(runtime, "EXPOSE") == "80"
    # With no MODEL_ID the image serves the model the build stage installed, at that path.
    build = parse(text)[0]
    installed = " ".join(rest for k, rest in build["instructions"] if k == "RUN")
    assert env.get("MODEL_ID", "").startswith("/usr/share/lm-infer/"), env
    assert "/out" + env["MODEL_ID"] in installed, "MODEL_ID is where the build installs the model"
    assert "/out/usr/local/bin/text-generation-launcher" in installed
    # No user switch: root by default like TGI's image; the manifests pick a UID themselves.
    assert not [k for k, _ in runtime["instructions"] if k == "USER"]


def check_runtime_has_every_library(text):
    runtime = apt_packages(parse(text)[1])
    missing = {package_of(so) for so in needed_libraries()} - BASE_PACKAGES - runtime
    assert not missing, f"the launcher links libraries from {missing}, not installed at run time"
    assert "ca-certificates" in runtime, "Hub downloads need the CA bundle"
    assert not {p for p in runtime if p.endswith("-dev") or p in ("build-essential", "python3")}


def check_build_has_setup_packages(text):
    build = apt_packages(parse(text)[0])
    missing = setup_packages() - TEST_ONLY_PACKAGES - build
    assert not missing, f"setup.sh builds with {missing}, the image's build stage does not install them"
    runs = " ".join(rest for k, rest in parse(text)[0]["instructions"] if k == "RUN")
    assert "-DLM_CUDA=OFF" in runs and "-DLM_BUILD_TESTS=OFF" in runs
    assert "march=native" not in runs, "the image must run on any x86-64 CPU"


def check_build_copies_xgrammar_patches(text):
    # fetch_xgrammar.sh patches XGrammar with scripts/patches/: without them in the layer it runs
    # in, the image would build XGrammar unpatched (or the script would fail).
    build = parse(text)[0]["instructions"]
    fetch = next(i for i, (k, rest) in enumerate(build)
                 if k == "RUN" and "scripts/fetch_xgrammar.sh" in rest)
    copied = " ".join(rest for k, rest in build[:fetch] if k == "COPY")
    assert "scripts/patches" in copied, "scripts/patches is copied before fetch_xgrammar.sh runs"


def check_manifest_command(text):
    deployment = yaml.safe_load((ROOT / "deploy/kubernetes/deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # The manifest's command replaces the entrypoint: it must name the launcher the image holds.
    assert container["command"][0] == json.loads(one(parse(text)[1], "ENTRYPOINT"))[0]


CHECKS = [check_stages_and_base, check_runtime_conventions, check_runtime_has_every_library,
          check_build_has_setup_packages, check_build_copies_xgrammar_patches,
          check_manifest_command]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_dockerfile(check):
    check(DOCKERFILE.read_text())


BREAKAGES = {
    check_stages_and_base: ("ARG BASE_IMAGE=debian:bookworm-slim", "ARG BASE_IMAGE=ubuntu:24.04"),
    check_runtime_conventions: ("    PORT=80 \\", "    PORT=8080 \\"),
    check_runtime_has_every_library: (" libicu72", ""),
    check_build_has_setup_packages: (" libpcre2-dev", ""),
    check_build_copies_xgrammar_patches: ("COPY scripts/patches scripts/patches\n", ""),
    check_manifest_command: ('ENTRYPOINT ["text-generation-launcher"]', 'ENTRYPOINT ["launcher"]'),
}


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_check_catches(check):
    old, new = BREAKAGES[check]
    text = DOCKERFILE.read_text()
    assert old in text
    with pytest.raises(AssertionError):
        check(text.replace(old, new, 1))

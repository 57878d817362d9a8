# The server as TGI ships it: an image whose entrypoint is `text-generation-launcher`, listening on
# $PORT (80) with the Hugging Face cache on the /data volume. With no --model-id / MODEL_ID it serves
# the embedded default model (SmolLM2-135M-Instruct, Q4_1 GGUF), so it runs offline.
#
#   podman build -t lm-infer .            (or docker build; BASE_IMAGE picks the Debian base)
#   podman run -p 8080:80 -v $PWD/data:/data lm-infer [--model-id ...]
#
# The runtime stage holds only the launcher, the shared libraries it links and the default model:
# no compiler, no Python. It runs as root by default, like TGI's image (so a mounted /data is
# writable), and unchanged as any non-root UID (nothing is written outside /data and /tmp).
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# Behind a TLS-intercepting proxy: the path of a CA bundle mounted into the build
# (`podman build -v /etc/ssl/certs/ca-certificates.crt:/run/build-ca.crt:ro
# --build-arg BUILD_CA_BUNDLE=/run/build-ca.crt`), used for the build's PyPI downloads and never
# copied into an image.
ARG BUILD_CA_BUNDLE=
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends build-essential cmake ccache pkg-config patch \
      python3 python3-pip unzip curl ca-certificates nlohmann-json3-dev libspdlog-dev libfmt-dev \
      libpcre2-dev libicu-dev libcli11-dev libboost-dev libcurl4-openssl-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The default model and XGrammar's sdist first, both sha256-pinned, and our patches to XGrammar:
# their layer stays cached while the sources change.
COPY scripts/fetch_models.sh scripts/fetch_xgrammar.sh scripts/
COPY scripts/patches scripts/patches
RUN if [ -n "$BUILD_CA_BUNDLE" ]; then export PIP_CERT="$BUILD_CA_BUNDLE" CURL_CA_BUNDLE="$BUILD_CA_BUNDLE"; fi \
 && scripts/fetch_models.sh --default-model-only \
 && scripts/fetch_xgrammar.sh
COPY CMakeLists.txt ./
COPY cmake cmake
COPY src src
# The launcher alone, built as CI tests and the benchmarks measure it (RelWithDebInfo, -O2; the debug
# info is stripped below), with CPU kernels for every x86-64 level chosen at run time (no
# -march=native: the image runs on any x86-64 CPU). Warnings are CI's concern (-Werror there), not
# a user's build on another base; ccache's folder is a build cache, not a layer.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLM_BUILD_TESTS=OFF -DLM_CUDA=OFF \
 && cmake --build build -j "$(nproc)" --target text-generation-launcher \
 && install -D -s build/src/app/text-generation-launcher /out/usr/local/bin/text-generation-launcher \
 && install -D -m 0644 models/SmolLM2-135M-Instruct.Q4_1.gguf \
      /out/usr/share/lm-infer/SmolLM2-135M-Instruct.Q4_1.gguf

FROM ${BASE_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# The launcher's shared libraries (ldd of the build above) and the CA bundle for Hub downloads.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libpcre2-8-0 libicu72 libcurl4 libssl3 \
      libspdlog1.10 libfmt9 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
COPY --from=build /out/ /
# TGI's image conventions: HF_HOME=/data (Hub cache in /data/hub), PORT=80, a /data volume.
ENV HF_HOME=/data \
    PORT=80 \
    MODEL_ID=/usr/share/lm-infer/SmolLM2-135M-Instruct.Q4_1.gguf
VOLUME /data
WORKDIR /data
EXPOSE 80
ENTRYPOINT ["text-generation-launcher"]
CMD ["--json-output"]

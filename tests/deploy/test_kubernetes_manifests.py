"""deploy/kubernetes/: every manifest against the Kubernetes schemas, and against the server.

Core kinds are validated by kubernetes-validate (strict: unknown fields fail) for the oldest
Kubernetes the manifests claim (1.30, for the preStop sleep action) and the newest the tool knows.
CRD kinds (KEDA, the Inference Extension, Gateway API, Kustomize) have no schema there: their
documented required fields are checked here instead. The consistency checks read the server's
sources (route table, launcher flags, defaults), so a manifest that drifts from the server fails
`make test` rather than a rollout. Each check also runs on a broken copy of the manifests
(test_check_catches) to show it can fail.
"""
import copy
import functools
import json
import re
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as kv_utils  # scripts/requirements-test.txt; no skip if absent

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
KUBE_VERSIONS = ["1.30.0", kv_utils.latest_version()]

# Kinds served by CRDs (or tools): no schema in kubernetes-validate, required fields below.
CRD_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("inference.networking.k8s.io/v1", "InferencePool"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}

# Memory sizing of the default model, measured with deploy/kubernetes/measure_memory.py (see
# README.md): resident memory once ready = weights file + ~63 MiB; prefill scratch ~24 KiB per
# MAX_BATCH_PREFILL_TOKENS. Rounded up here; the request must exceed the estimate by HEADROOM.
RUNTIME_MIB = 64
PREFILL_BYTES_PER_TOKEN = 32 * 1024
HEADROOM = 1.10


def load_manifests():
    """{file name: [documents]} for every YAML file in deploy/kubernetes/."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        out[path.name] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return out


def find(manifests, kind, name=None):
    docs = [d for ds in manifests.values() for d in ds
            if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    return docs


def one(manifests, kind, name=None):
    docs = find(manifests, kind, name)
    assert len(docs) == 1, f"expected one {kind} {name or ''}, found {len(docs)}"
    return docs[0]


def deployment(m):
    return one(m, "Deployment")


def container(m):
    return deployment(m)["spec"]["template"]["spec"]["containers"][0]


def config_data(m):
    ref = container(m)["envFrom"][0]["configMapRef"]["name"]
    return one(m, "ConfigMap", ref)["data"]


def get(doc, dotted):
    for key in dotted.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def source(rel):
    return (ROOT / rel).read_text()


# --- What the server accepts, read from its sources -------------------------------------------

def routes():
    """{(method, path): needs_api_key} from router.cc's route table."""
    table = re.findall(r't\[\{"(GET|POST)", "(/[^"]*)"\}\] = \{(true|false),', source("src/server/router.cc"))
    assert table, "route table not found in src/server/router.cc"
    return {(meth, path): key == "true" for meth, path, key in table}


def launcher_variables():
    """Every environment variable the launcher reads: its flags' twins and the Hub's variables."""
    names = set(re.findall(r'envname\("([A-Z0-9_]+)"\)', source("src/app/launcher_flags.cc")))
    # hub_options.cc reads only environment variables by upper-case name (HF_HOME, HF_TOKEN, ...).
    names |= set(re.findall(r'"([A-Z][A-Z0-9_]+)"', source("src/hub/hub_options.cc")))
    for path in (ROOT / "src").rglob("*.cc"):
        names |= set(re.findall(r'getenv\("([A-Z0-9_]+)"\)', path.read_text()))
    assert {"MAX_TOTAL_TOKENS", "API_KEY", "HF_HOME", "HF_TOKEN"} <= names, names
    return names


def default_graceful_timeout():
    found = re.search(r"graceful_termination_timeout = (\d+);", source("src/app/launcher_args.h"))
    assert found, "default of --graceful-termination-timeout not found in launcher_args.h"
    return int(found.group(1))


def served_metric_names():
    text = "".join(p.read_text() for p in (ROOT / "src" / "server").rglob("*.cc"))
    return set(re.findall(r'"(tgi_[a-z_]+)"', text))


def command_flag(cmd, *names):
    for i, arg in enumerate(cmd):
        for n in names:
            if arg == n and i + 1 < len(cmd):
                return cmd[i + 1]
            if arg.startswith(n + "="):
                return arg.split("=", 1)[1]
    return None


def quantity_mib(q):
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    for suffix, factor in units.items():
        if str(q).endswith(suffix):
            return float(str(q)[: -len(suffix)]) * factor
    return float(q) / (1024 * 1024)


def quantity_cpu(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


# --- Checks: each returns a list of problems ---------------------------------------------------

@functools.lru_cache(maxsize=None)
def _schema_problem(doc_json, version):
    """None, or what kubernetes-validate says; cached because loading the schemas is slow and the
    broken copies in test_check_catches differ from the real manifests in one document only."""
    doc = json.loads(doc_json)
    try:
        kv_utils.validate(doc, version, strict=True)
    except kv_utils.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        return f"{doc['kind']} against {version}: {path}: {e.message}"
    except kv_utils.SchemaNotFoundError:
        return f"no schema for {doc['apiVersion']} {doc['kind']}: a typo, or a CRD not in CRD_KINDS"
    return None


def check_schemas(m):
    problems = []
    for fname, docs in m.items():
        for doc in docs:
            if (doc.get("apiVersion"), doc.get("kind")) in CRD_KINDS:
                continue
            for version in KUBE_VERSIONS:
                problem = _schema_problem(json.dumps(doc, sort_keys=True), version)
                if problem:
                    problems.append(f"{fname}: {problem}")
    return problems


def check_crd_required_fields(m):
    """The fields the CRDs' documentation marks required, and their documented value rules."""
    problems = []

    def need(doc, dotted):
        if get(doc, dotted) in (None, "", [], {}):
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: {dotted} is required")

    for so in find(m, "ScaledObject"):
        need(so, "spec.scaleTargetRef.name")
        need(so, "spec.triggers")
        for t in so["spec"].get("triggers") or []:
            if "type" not in t or "metadata" not in t:
                problems.append("ScaledObject: every trigger needs type and metadata")
            elif t["type"] == "prometheus":
                for field in ("serverAddress", "query", "threshold"):
                    if not t["metadata"].get(field):
                        problems.append(f"ScaledObject: prometheus trigger needs metadata.{field}")
                if not isinstance(t["metadata"].get("threshold", ""), str):
                    problems.append("ScaledObject: trigger metadata values must be strings")
    for pool in find(m, "InferencePool"):
        need(pool, "spec.selector.matchLabels")
        need(pool, "spec.targetPorts")
        need(pool, "spec.endpointPickerRef.name")
        ports = get(pool, "spec.targetPorts") or []
        if not 1 <= len(ports) <= 8 or not all(
                isinstance(p.get("number"), int) and 1 <= p["number"] <= 65535 for p in ports):
            problems.append("InferencePool: targetPorts must hold 1 to 8 {number: 1..65535}")
        ref = get(pool, "spec.endpointPickerRef") or {}
        if ref.get("kind", "Service") == "Service" and not get(ref, "port.number"):
            problems.append("InferencePool: endpointPickerRef.port.number is required for a Service")
        if ref.get("failureMode", "FailClose") not in ("FailOpen", "FailClose"):
            problems.append("InferencePool: endpointPickerRef.failureMode is FailOpen or FailClose")
    for route in find(m, "HTTPRoute"):
        need(route, "spec.parentRefs")
        for rule in get(route, "spec.rules") or []:
            for b in rule.get("backendRefs", []):
                if not b.get("name"):
                    problems.append("HTTPRoute: backendRefs need a name")
    for k in find(m, "Kustomization"):
        listed = set(k.get("resources") or [])
        missing = [r for r in listed if not (K8S / r).exists()]
        if missing:
            problems.append(f"kustomization.yaml lists missing files {missing}")
        for fname, docs in m.items():
            core = all((d["apiVersion"], d["kind"]) not in CRD_KINDS for d in docs)
            example = any(d.get("metadata", {}).get("namespace") for d in docs)
            if core and not example and fname not in listed:
                problems.append(f"kustomization.yaml does not list {fname}")
    return problems


def check_probes(m):
    problems = []
    table = routes()
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = container(m).get(probe)
        path = get(spec or {}, "httpGet.path")
        if path is None:
            problems.append(f"{probe}: missing or not an httpGet probe")
        elif ("GET", path) not in table:
            problems.append(f"{probe}: GET {path} is not a route of router.cc")
        elif table[("GET", path)]:
            problems.append(f"{probe}: GET {path} needs the API key; probes send none")
    return problems


def check_ports(m):
    problems = []
    c = container(m)
    port = command_flag(c["command"] + c.get("args", []), "--port", "-p")
    by_name = {p["name"]: p["containerPort"] for p in c["ports"]}
    if port is None or int(port) not in by_name.values():
        problems.append(f"container ports {by_name} do not include the command's --port {port}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = get(c, f"{probe}.httpGet.port")
        if by_name.get(p, p) != int(port or 0):
            problems.append(f"{probe} port {p} is not the server's port {port}")
    for svc in find(m, "Service"):
        for sp in svc["spec"]["ports"]:
            if by_name.get(sp["targetPort"], sp["targetPort"]) != int(port or 0):
                problems.append(f"Service targetPort {sp['targetPort']} is not the server's port")
    ann = get(deployment(m), "spec.template.metadata.annotations") or {}
    if ann.get("prometheus.io/port") not in (None, str(port)):
        problems.append("prometheus.io/port annotation is not the server's port")
    for pool in find(m, "InferencePool"):
        if [p["number"] for p in pool["spec"]["targetPorts"]] != [int(port or 0)]:
            problems.append("InferencePool targetPorts is not the container's port")
    return problems


def check_grace_period(m):
    c = container(m)
    timeout = command_flag(c["command"] + c.get("args", []), "--graceful-termination-timeout", "-g")
    timeout = timeout or config_data(m).get("GRACEFUL_TERMINATION_TIMEOUT")
    timeout = int(timeout) if timeout else default_graceful_timeout()
    sleep = get(c, "lifecycle.preStop.sleep.seconds") or 0
    grace = get(deployment(m), "spec.template.spec.terminationGracePeriodSeconds") or 30
    # The kubelet's grace period runs from the preStop hook on; the launcher needs the sleep, its
    # whole drain, and a moment to exit, or the last streams are cut by SIGKILL.
    if grace < sleep + timeout + 1:
        return [f"terminationGracePeriodSeconds {grace} < preStop {sleep} s + graceful "
                f"termination timeout {timeout} s + 1"]
    return []


def check_env(m):
    problems = []
    accepted = launcher_variables()
    c = container(m)
    names = [e["name"] for e in c.get("env", [])] + list(config_data(m))
    for n in names:
        if n not in accepted:
            problems.append(f"{n} is not a variable the launcher reads")
    # References resolve: Secret/ConfigMap names and keys, the claim.
    for e in c.get("env", []):
        ref = get(e, "valueFrom.secretKeyRef")
        if ref:
            secrets = find(m, "Secret", ref["name"])
            keys = set((secrets[0].get("stringData") or {}) | (secrets[0].get("data") or {})) if secrets else set()
            if ref["key"] not in keys:
                problems.append(f"{e['name']}: Secret {ref['name']} has no key {ref['key']}")
        ref = get(e, "valueFrom.configMapKeyRef")
        if ref and ref["key"] not in (one(m, "ConfigMap", ref["name"])["data"]):
            problems.append(f"{e['name']}: ConfigMap {ref['name']} has no key {ref['key']}")
    for src in c.get("envFrom", []):
        name = get(src, "configMapRef.name")
        if name and not find(m, "ConfigMap", name):
            problems.append(f"envFrom: no ConfigMap {name}")
    for vol in get(deployment(m), "spec.template.spec.volumes") or []:
        claim = get(vol, "persistentVolumeClaim.claimName")
        if claim and not find(m, "PersistentVolumeClaim", claim):
            problems.append(f"volume {vol['name']}: no PersistentVolumeClaim {claim}")
    hf_home = {e["name"]: e.get("value") for e in c.get("env", [])}.get("HF_HOME")
    if hf_home not in [v["mountPath"] for v in c.get("volumeMounts", [])]:
        problems.append(f"HF_HOME {hf_home} is not a mounted volume")
    return problems


@functools.lru_cache(maxsize=None)
def default_model_kv_bytes_per_token():
    from gguf import GGUFReader  # slow (reads the tensor table too): once per session
    fields = GGUFReader(str(DEFAULT_MODEL)).fields

    def meta(key):
        f = fields[key]
        return int(f.parts[f.data[0]][0])

    layers, kv_heads = meta("llama.block_count"), meta("llama.attention.head_count_kv")
    head_dim = meta("llama.embedding_length") // meta("llama.attention.head_count")
    return layers * 2 * kv_heads * head_dim * 4  # fp32 K and V, as KvPool::bytes_per_token


def check_sizing(m):
    """The launcher's own start checks, and resources that fit the KV pool the settings ask for."""
    problems = []
    cfg = {k: v for k, v in config_data(m).items()}
    need = ["MAX_INPUT_LENGTH", "MAX_TOTAL_TOKENS", "MAX_BATCH_PREFILL_TOKENS", "MAX_BATCH_TOTAL_TOKENS"]
    if any(k not in cfg for k in need):
        return [f"the ConfigMap must set {need}: unset, MAX_BATCH_TOTAL_TOKENS follows the node's "
                f"memory, not the pod's"]
    inp, total, prefill, batch = (int(cfg[k]) for k in need)
    if not inp < total <= batch:
        problems.append(f"the launcher refuses MAX_INPUT_LENGTH {inp} / MAX_TOTAL_TOKENS {total} / "
                        f"MAX_BATCH_TOTAL_TOKENS {batch}: needs input < total <= batch total")
    if prefill > batch:
        problems.append("the launcher refuses MAX_BATCH_PREFILL_TOKENS > MAX_BATCH_TOTAL_TOKENS")
    res = container(m)["resources"]
    if res["requests"] != res["limits"]:
        problems.append("requests != limits: the pod is not Guaranteed QoS")
    if float(cfg.get("NUM_THREADS", 0)) != quantity_cpu(res["limits"]["cpu"]):
        problems.append(f"NUM_THREADS {cfg.get('NUM_THREADS')} != CPU limit {res['limits']['cpu']}")
    if "MODEL_ID" in cfg:
        problems.append("MODEL_ID is set: this check only knows the default model's sizes")
        return problems
    kv_bytes = default_model_kv_bytes_per_token()
    estimate = (DEFAULT_MODEL.stat().st_size / 2**20 + RUNTIME_MIB
                + (batch * kv_bytes + prefill * PREFILL_BYTES_PER_TOKEN) / 2**20)
    memory = quantity_mib(res["requests"]["memory"])
    if memory < estimate * HEADROOM:
        problems.append(f"memory {memory:.0f} MiB < {HEADROOM} x estimate {estimate:.0f} MiB "
                        f"(weights + runtime + {batch} x {kv_bytes} B KV + prefill)")
    return problems


def check_scaling(m):
    problems = []
    labels = get(deployment(m), "spec.template.metadata.labels")
    name = deployment(m)["metadata"]["name"]
    selectors = [("Service", get(s, "spec.selector")) for s in find(m, "Service")]
    selectors += [("PodDisruptionBudget", get(p, "spec.selector.matchLabels")) for p in find(m, "PodDisruptionBudget")]
    selectors += [("InferencePool", get(p, "spec.selector.matchLabels")) for p in find(m, "InferencePool")]
    selectors += [("topologySpreadConstraints", get(t, "labelSelector.matchLabels"))
                  for t in get(deployment(m), "spec.template.spec.topologySpreadConstraints") or []]
    selectors += [("Deployment", get(deployment(m), "spec.selector.matchLabels"))]
    for kind, sel in selectors:
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            problems.append(f"{kind} selector {sel} does not select the pods {labels}")
    hpa = one(m, "HorizontalPodAutoscaler")
    so = one(m, "ScaledObject")
    for kind, target in (("HPA", hpa["spec"]["scaleTargetRef"]), ("ScaledObject", so["spec"]["scaleTargetRef"])):
        if target["name"] != name or target.get("kind", "Deployment") != "Deployment":
            problems.append(f"{kind} does not scale Deployment {name}")
    ext = hpa["spec"]["metrics"][0]["external"]
    metric, threshold = ext["metric"]["name"], ext["target"]["averageValue"]
    if any(labels.get(k) != v for k, v in ext["metric"]["selector"]["matchLabels"].items()):
        problems.append("HPA metric selector does not match the pods' labels")
    trig = so["spec"]["triggers"][0]["metadata"]
    if metric not in trig["query"] or str(threshold) != str(trig["threshold"]):
        problems.append(f"ScaledObject ({trig['query']}, {trig['threshold']}) is not the HPA's "
                        f"({metric}, {threshold})")
    if (so["spec"]["minReplicaCount"], so["spec"]["maxReplicaCount"]) != (
            hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]):
        problems.append("ScaledObject replica bounds differ from the HPA's")
    adapter = yaml.safe_load(one(m, "ConfigMap", "adapter-config")["data"]["config.yaml"])
    rule_names = [r["name"]["as"] for r in adapter["externalRules"]]
    if metric not in rule_names:
        problems.append(f"no prometheus-adapter external rule serves {metric} (has {rule_names})")
    served = served_metric_names()
    if metric not in served:
        problems.append(f"the HPA scales on {metric}, which the server does not export")
    for fname in m:
        for used in set(re.findall(r"\btgi_[a-z_]+", (K8S / fname).read_text())):
            if used not in served:
                problems.append(f"{fname}: {used} is not a metric the server exports")
    return problems


CHECKS = [check_schemas, check_crd_required_fields, check_probes, check_ports,
          check_grace_period, check_env, check_sizing, check_scaling]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_manifests(check):
    problems = check(load_manifests())
    assert not problems, "\n".join(problems)


# --- Each check fails on a manifest broken the way it guards against ----------------------------

def _c(m):
    return container(m)


BREAKAGES = [
    (check_schemas, "typo in a field", lambda m: _c(m).update(imagePullPolicyy="Always")),
    (check_schemas, "wrong type", lambda m: _c(m)["ports"][0].update(containerPort="8080")),
    (check_schemas, "unknown apiVersion", lambda m: one(m, "PodDisruptionBudget").update(apiVersion="policy/v1beta2")),
    (check_crd_required_fields, "KEDA without triggers", lambda m: one(m, "ScaledObject")["spec"].pop("triggers")),
    (check_crd_required_fields, "pool without endpoint picker port",
     lambda m: one(m, "InferencePool")["spec"]["endpointPickerRef"].pop("port")),
    (check_crd_required_fields, "kustomization lists a missing file",
     lambda m: one(m, "Kustomization")["resources"].append("ingress.yaml")),
    (check_crd_required_fields, "kustomization leaves out a core file",
     lambda m: one(m, "Kustomization")["resources"].remove("pdb.yaml")),
    (check_probes, "probe on a missing route", lambda m: _c(m)["livenessProbe"]["httpGet"].update(path="/healthz")),
    (check_probes, "probe on a keyed route", lambda m: _c(m)["readinessProbe"]["httpGet"].update(path="/tokenize")),
    (check_ports, "port differs from --port", lambda m: _c(m)["ports"][0].update(containerPort=8000)),
    (check_ports, "Service to a wrong port", lambda m: one(m, "Service")["spec"]["ports"][0].update(targetPort=3000)),
    (check_grace_period, "grace shorter than the drain",
     lambda m: deployment(m)["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=30)),
    (check_grace_period, "longer drain in the ConfigMap",
     lambda m: config_data(m).update(GRACEFUL_TERMINATION_TIMEOUT="120")),
    (check_env, "unknown variable", lambda m: config_data(m).update(MAX_INPUT_TOKEN="100")),
    (check_env, "missing Secret key", lambda m: one(m, "Secret")["stringData"].pop("API_KEY")),
    (check_env, "missing claim", lambda m: one(m, "PersistentVolumeClaim")["metadata"].update(name="other")),
    (check_sizing, "KV pool left to the node", lambda m: config_data(m).pop("MAX_BATCH_TOTAL_TOKENS")),
    (check_sizing, "pool grown, memory not", lambda m: config_data(m).update(MAX_BATCH_TOTAL_TOKENS="65536")),
    (check_sizing, "threads differ from CPU", lambda m: config_data(m).update(NUM_THREADS="8")),
    (check_scaling, "KEDA differs from HPA",
     lambda m: one(m, "ScaledObject")["spec"]["triggers"][0]["metadata"].update(threshold="10")),
    (check_scaling, "HPA on a metric the server does not export",
     lambda m: one(m, "HorizontalPodAutoscaler")["spec"]["metrics"][0]["external"]["metric"].update(
         name="tgi_queue_length")),
    (check_scaling, "PDB selects nothing",
     lambda m: one(m, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].update(app="other")),
]


@pytest.mark.parametrize("check,what,breaks", BREAKAGES, ids=[b[1] for b in BREAKAGES])
def test_check_catches(check, what, breaks):
    m = copy.deepcopy(load_manifests())
    breaks(m)
    assert check(m), f"{check.__name__} did not notice: {what}"

"""deploy/'s Kubernetes manifests: valid against the Kubernetes schemas (kubernetes-validate, two
releases, strict) and the Gateway API Inference Extension's CRDs (tests/data/k8s-crds), and
consistent with each other and with fp4serve: the Service and the InferencePool select the pods'
labels and port, the probes hit /health, every flag exists, and the termination grace covers the
preStop sleep plus --shutdown-timeout."""
import json
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-fleet" / "bin" / "python"
VALIDATE = Path(__file__).with_name("k8s_validate.py")
CRDS = ROOT / "tests" / "data" / "k8s-crds"
MANIFESTS = sorted((ROOT / "deploy").glob("*.yaml"))
# The oldest release with the preStop sleep action on by default, and a recent one.
KUBERNETES = ["1.30.0", "1.35.0"]


def validate(*manifests):
    if not PYTHON.exists():
        pytest.fail(f"{PYTHON} is missing: scripts/setup.sh makes .venv-fleet from tests/e2e/requirements-fleet.txt")
    args = [str(PYTHON), str(VALIDATE), "--crds", str(CRDS)]
    for k in KUBERNETES:
        args += ["-k", k]
    proc = subprocess.run(args + [str(m) for m in manifests], capture_output=True, text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {"errors": [proc.stderr]}


def docs():
    out = {}
    for m in MANIFESTS:
        for d in yaml.safe_load_all(m.read_text()):
            if d:
                out[d["kind"]] = d
    return out


def test_manifests_validate_against_the_kubernetes_and_crd_schemas():
    rc, result = validate(*MANIFESTS)
    assert rc == 0 and not result["errors"], result["errors"]
    kinds = {kind for _, kind, _, _ in result["validated"]}
    assert {"Deployment", "Service", "InferencePool", "InferenceObjective"} <= kinds, result


def test_the_validator_rejects_an_unknown_field(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text((ROOT / "deploy" / "fp4serve.yaml").read_text().replace("periodSeconds: 5", "periodSecond: 5"))
    pool = tmp_path / "pool.yaml"
    pool.write_text((ROOT / "deploy" / "inferencepool.yaml").read_text().replace("targetPorts:", "targetPort:"))
    rc, result = validate(broken, pool)
    assert rc == 1
    text = "\n".join(result["errors"])
    assert "periodSecond" in text and "targetPort" in text, text


def test_the_manifests_agree_with_each_other_and_with_fp4serve(fp4serve_binary):
    d = docs()
    pod = d["Deployment"]["spec"]["template"]
    labels = pod["metadata"]["labels"]
    [container] = pod["spec"]["containers"]
    [port] = container["ports"]
    assert d["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert d["Service"]["spec"]["selector"].items() <= labels.items()
    assert d["InferencePool"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [p["number"] for p in d["InferencePool"]["spec"]["targetPorts"]] == [port["containerPort"]]
    assert d["InferenceObjective"]["spec"]["poolRef"]["name"] == d["InferencePool"]["metadata"]["name"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port["containerPort"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
        assert container[probe]["httpGet"]["port"] in (port["name"], port["containerPort"]), probe

    args = container["args"]
    assert args[0] == "serve"
    flag = lambda name: float(args[args.index(name) + 1])
    # The listener opens on the port the probes and the pool use.
    assert int(flag("--port")) == port["containerPort"]
    # Grace covers the preStop sleep and the whole drain; liveness cannot kill a pod mid-drain.
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert grace > pre_stop + flag("--shutdown-timeout")
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > flag("--shutdown-timeout")
    # A wedge is caught: /health turns 503 after --health-stall-timeout, within a few liveness periods.
    assert flag("--health-stall-timeout") > 0

    helps = subprocess.run([str(fp4serve_binary), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for a in args:
        if a.startswith("--"):
            assert a in helps, f"{a} is not an fp4serve serve flag"

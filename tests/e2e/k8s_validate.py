"""Validates Kubernetes manifests: core kinds against the schemas packaged in kubernetes-validate
(strict: unknown fields are errors), custom resources against their CRD's openAPIV3Schema made
strict the same way. Runs in .venv-fleet (tests/e2e/test_deploy_manifests.py calls it):

  python k8s_validate.py --crds DIR --kubernetes-version 1.30.0 ... MANIFEST.yaml ...

Prints one JSON object: {"validated": [[file, kind, name, how], ...], "errors": [text, ...]}."""
import argparse
import copy
import json
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml


def strict(schema):
    """The schema with additionalProperties: false on every object that lists its properties (an API
    server in strict field validation rejects unknown fields; jsonschema would let them through)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def load_crds(directory):
    """{(group, version, kind): strict openAPIV3Schema} of every CRD under directory."""
    out = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                schema = strict(version["schema"]["openAPIV3Schema"])
                schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by the API server
                out[(spec["group"], version["name"], spec["names"]["kind"])] = schema
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crds", required=True)
    ap.add_argument("-k", "--kubernetes-version", action="append", required=True)
    ap.add_argument("manifests", nargs="+")
    args = ap.parse_args()
    crds = load_crds(args.crds)
    validated, errors = [], []
    for manifest in args.manifests:
        for doc in yaml.safe_load_all(Path(manifest).read_text()):
            if not doc:
                continue
            kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
            group, _, version = doc.get("apiVersion", "").rpartition("/")
            where = f"{manifest}: {kind}/{name}"
            if (group, version, kind) in crds:
                try:
                    jsonschema.validate(doc, crds[(group, version, kind)])
                    validated.append([manifest, kind, name, f"CRD {group}/{version}"])
                except jsonschema.ValidationError as e:
                    errors.append(f"{where}: {e.message} at {'/'.join(map(str, e.absolute_path))}")
                continue
            for k8s in args.kubernetes_version:
                try:
                    kubernetes_validate.validate(doc, k8s, strict=True)
                    validated.append([manifest, kind, name, f"kubernetes {k8s}"])
                except kubernetes_validate.utils.SchemaNotFoundError:
                    errors.append(f"{where}: no schema for {doc.get('apiVersion')} {kind} (Kubernetes {k8s}) "
                                  "and no CRD for it under --crds")
                except kubernetes_validate.ValidationError as e:
                    errors.append(f"{where} (Kubernetes {k8s}): {e.message} at "
                                  f"{'/'.join(map(str, e.absolute_path))}")
    print(json.dumps({"validated": validated, "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

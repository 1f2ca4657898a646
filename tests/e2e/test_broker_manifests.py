"""The broker's manifests (src/broker/manifests.h) as the backends' own client code reads them.

tests/unit/broker/manifests_test.cc proves that the emitters write exactly the goldens under
tests/data/broker/; this file checks those goldens offline, with Debian's libraries:

- Kubernetes Jobs are deserialised into python3-kubernetes' V1Job (the generated models of the
  Kubernetes API, 1.22 in Debian 12) and serialised back: a misspelt or unknown field is dropped
  by the models and a wrong type converted, so any difference from the file is an error; the
  models' constructors refuse a missing required field (a container's name).
- Marathon apps and Chronos jobs are checked with python3-jsonschema against the schemas under
  tests/data/broker/schemas/ (written from Marathon 1.7's app schema and Chronos' job fields,
  with the rule that GPUs need the Mesos containerizer).

Each check is also shown a broken copy of a golden, and must refuse it. No daemons, no build.
"""

from __future__ import annotations

import copy
import glob
import json
import os

import pytest

from conftest import REPO_ROOT

DATA = os.path.join(REPO_ROOT, "tests", "data", "broker")

kubernetes_client = pytest.importorskip(
    "kubernetes.client", reason="python3-kubernetes is not installed (scripts/setup.sh)")
jsonschema = pytest.importorskip(
    "jsonschema", reason="python3-jsonschema is not installed (scripts/setup.sh)")


def goldens(kind: str) -> list[str]:
    found = sorted(glob.glob(os.path.join(DATA, kind + "_*.json")))
    assert found, f"no {kind} goldens under {DATA}"
    return found


def load(path: str):
    with open(path) as f:
        return json.load(f)


class _Response:
    """What ApiClient.deserialize reads: an HTTP answer's body."""

    def __init__(self, doc):
        self.data = json.dumps(doc)


def kubernetes_errors(doc) -> list[str]:
    """Why the Kubernetes client models do not hold `doc` as it is, as a V1Job; [] when they do."""
    if doc.get("apiVersion") != "batch/v1" or doc.get("kind") != "Job":
        return [f"not a batch/v1 Job: {doc.get('apiVersion')} {doc.get('kind')}"]
    api = kubernetes_client.ApiClient()
    try:
        job = api.deserialize(_Response(doc), "V1Job")
    except (ValueError, TypeError) as e:
        return [f"V1Job refuses it: {e}"]
    return differences(doc, api.sanitize_for_serialization(job), "Job")


def differences(want, got, where: str) -> list[str]:
    """Where the client's copy `got` of a document differs from the file's `want`."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}.{k}: unknown field, dropped by the client models"
               for k in want if k not in got]
        for k in want:
            if k in got:
                out += differences(want[k], got[k], f"{where}.{k}")
        return out + [f"{where}.{k}: added by the client models" for k in got if k not in want]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (w, g) in enumerate(zip(want, got))
                for d in differences(w, g, f"{where}[{i}]")]
    if want != got or type(want) is not type(got):
        return [f"{where}: {json.dumps(want)} reads as {json.dumps(got)}"]
    return []


def schema_errors(doc, schema_name: str) -> list[str]:
    """What the Draft 4 schema `schema_name` finds wrong with `doc`; [] when nothing."""
    schema = load(os.path.join(DATA, "schemas", schema_name))
    validator = jsonschema.Draft4Validator(schema)
    out = []
    for e in validator.iter_errors(doc):
        where = "/".join(map(str, e.absolute_path)) or "(top)"
        # A rule of ours (an anyOf with a description) is named by its description, not by
        # jsonschema's "is not valid under any of the given schemas" and the whole document.
        rule = e.schema.get("description") if e.validator == "anyOf" else None
        out.append(f"{where}: {rule}" if rule else f"{where}: {e.message}")
    return out


def test_schemas_are_valid_draft4():
    for name in ("marathon-app.json", "chronos-job.json"):
        jsonschema.Draft4Validator.check_schema(load(os.path.join(DATA, "schemas", name)))


@pytest.mark.parametrize("path", goldens("kubernetes"), ids=os.path.basename)
def test_kubernetes_job_is_a_v1_job(path):
    doc = load(path)
    assert kubernetes_errors(doc) == []
    pod = doc["spec"]["template"]["spec"]
    assert doc["spec"]["backoffLimit"] == 0
    assert pod["restartPolicy"] == "Never"
    for c in pod["containers"]:
        assert c["resources"]["limits"] == c["resources"]["requests"]


@pytest.mark.parametrize("path", goldens("marathon"), ids=os.path.basename)
def test_marathon_app_fits_the_app_schema(path):
    assert schema_errors(load(path), "marathon-app.json") == []


@pytest.mark.parametrize("path", goldens("chronos"), ids=os.path.basename)
def test_chronos_job_fits_the_job_schema(path):
    doc = load(path)
    assert schema_errors(doc, "chronos-job.json") == []
    assert doc["retries"] == 0 and doc["schedule"].startswith("R1//")


@pytest.mark.parametrize("path", goldens("openstack"), ids=os.path.basename)
def test_openstack_request_names_image_and_flavour(path):
    server = load(path)["server"]
    assert server["imageRef"] and server["flavorRef"] and server["name"]


def broken(path: str, edit):
    doc = copy.deepcopy(load(path))
    edit(doc)
    return doc


def test_kubernetes_check_refuses_broken_jobs():
    path = os.path.join(DATA, "kubernetes_gpu.json")

    def misspelt(d):
        d["spec"]["activeDeadlineSecond"] = d["spec"].pop("activeDeadlineSeconds")

    def pod_gpus(d):
        d["spec"]["template"]["spec"]["gpus"] = 2

    def string_count(d):
        d["spec"]["backoffLimit"] = "0"

    def nameless(d):
        del d["spec"]["template"]["spec"]["containers"][0]["name"]

    assert kubernetes_errors(broken(path, misspelt)) == [
        "Job.spec.activeDeadlineSecond: unknown field, dropped by the client models"]
    assert kubernetes_errors(broken(path, pod_gpus)) == [
        "Job.spec.template.spec.gpus: unknown field, dropped by the client models"]
    assert kubernetes_errors(broken(path, string_count)) == [
        'Job.spec.backoffLimit: "0" reads as 0']
    assert kubernetes_errors(broken(path, nameless)) == [
        "V1Job refuses it: Invalid value for `name`, must not be `None`"]


def test_marathon_schema_refuses_broken_apps():
    path = os.path.join(DATA, "marathon_gpu.json")
    docker = broken(path, lambda d: d["container"].update(type="DOCKER"))
    assert schema_errors(docker, "marathon-app.json") == [
        "(top): gpus > 0 needs container.type MESOS: Marathon's Docker containerizer has no GPUs"
        " (AppValidation.complyWithGpuRules)"]
    typo = broken(path, lambda d: d.update(gpu=d.pop("gpus")))
    assert any("'gpu' was unexpected" in e for e in schema_errors(typo, "marathon-app.json"))
    fraction = broken(path, lambda d: d.update(gpus=0.5))
    assert schema_errors(fraction, "marathon-app.json") != []
    upper = broken(path, lambda d: d["networks"][0].update(mode="HOST"))
    assert schema_errors(upper, "marathon-app.json") != []
    cpu_docker = os.path.join(DATA, "marathon_cpu.json")
    assert schema_errors(load(cpu_docker), "marathon-app.json") == []  # DOCKER without GPUs


def test_chronos_schema_refuses_broken_jobs():
    path = os.path.join(DATA, "chronos_gpu.json")
    docker = broken(path, lambda d: d["container"].update(type="DOCKER"))
    assert schema_errors(docker, "chronos-job.json") == [
        "(top): gpus > 0 needs container.type MESOS: GPUs only work with the Mesos containerizer"]
    no_schedule = broken(path, lambda d: d.pop("schedule"))
    assert schema_errors(no_schedule, "chronos-job.json") != []
    both = broken(path, lambda d: d.update(parents=["other"]))
    assert schema_errors(both, "chronos-job.json") != []
    typo = broken(path, lambda d: d.update(retry=d.pop("retries")))
    assert any("'retry' was unexpected" in e for e in schema_errors(typo, "chronos-job.json"))
    operator = broken(path, lambda d: d["constraints"][0].__setitem__(1, "CLUSTER"))
    assert schema_errors(operator, "chronos-job.json") != []

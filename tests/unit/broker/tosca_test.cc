#include "broker/tosca.h"

#include <gtest/gtest.h>

#include "broker/job_body.h"
#include "devices/yaml.h"

namespace berth::broker {
namespace {

using nlohmann::json;

// Templates in the shape of DEEP's (indigo-dc/tosca-templates: deep-oc/deep-oc-mods_mesos-gpu.yml,
// deep_qcg_job.yaml), written for these tests.

/// A DEEP-OC module on Mesos with GPUs: a Marathon app on a Docker runtime box.
const char* const kMesosGpu = R"(tosca_definitions_version: "tosca_simple_yaml_1_0"
imports:
- indigo_custom_types: "https://raw.githubusercontent.com/indigo-dc/tosca-types/master/custom_types.yaml"
description: A DEEP-OC module with a GPU
metadata:
  display_name: Test module
  tag: GPU
topology_template:
  inputs:
    docker_privileged:
      type: string
      required: yes
      default: true
    mem_size:
      type: string
      required: no
      default: "4096 MB"
    num_cpus:
      type: integer
      required: no
      default: 1
    num_gpus:
      type: integer
      required: no
      default: 1
    oneclient_token:
      type: string
      required: no
    rclone_url:
      type: string
      required: no
      default: "https://nc.example.org/remote.php/webdav/"
    run_command:
      type: string
      required: yes
      default: "deep-start -do"
  node_templates:
    Docker:
      type: "tosca.nodes.indigo.Container.Runtime.Docker"
      capabilities:
        host:
          properties:
            publish_all: false
            publish_ports:
            - protocol: "tcp"
              source: 5000
            mem_size: { get_input: mem_size }
            num_cpus: { get_input: num_cpus }
            num_gpus: { get_input: num_gpus }
        scalable:
          properties:
            min_instances: 1
            max_instances: 1
            default_instances: 1
    marathon:
      type: "tosca.nodes.indigo.Container.Application.Docker.Marathon"
      properties:
        force_pull_image: true
        command: { get_input: run_command }
        enable_https: true
        environment_variables:
          ONECLIENT_ACCESS_TOKEN: { get_input: oneclient_token }
          RCLONE_CONFIG_RSHARE_TYPE: webdav
          RCLONE_CONFIG_RSHARE_URL: { get_input: rclone_url }
          DISABLE_AUTHENTICATION: { get_input: docker_privileged }
          APP_URL: { concat: [ "https://", { get_input: rclone_url }, "x" ] }
        labels:
          HAPROXY_GROUP: "external"
        privileged: { get_input: docker_privileged }
      requirements:
      - host:
          node: "Docker"
          capability: "tosca.capabilities.indigo.Container.Docker"
          relationship: "tosca.relationships.HostedOn"
      artifacts:
        image:
          file: "deephdc/deep-oc-mods:gpu"
          type: "tosca.artifacts.Deployment.Image.Container.Docker"
  outputs:
    deepaas_endpoint:
      value: { concat: [ 'https://', { get_attribute : [ marathon, load_balancer_ips, 0 ] } ] }
)";

/// A DEEP-OC job on an HPC cluster through QCG.
const char* const kQcgJob = R"(tosca_definitions_version: tosca_simple_yaml_1_0
description: Submit a DEEP-OC job to an HPC batch cluster
topology_template:
  inputs:
    docker_image:
      type: string
      default: deephdc/deep-oc-benchmarks_cnn:gpu
      required: no
    run_command:
      type: string
      required: no
      default: 'deepaas-cli get_metadata'
    onedata_space_name:
      type: string
      required: yes
    num_gpus:
      type: integer
      required: no
      default: 0
    total_nodes:
      type: integer
      required: no
      default: 1
    cores_per_node:
      type: integer
      required: no
      default: 2
    queue:
      type: string
      required: no
      default: standard
    wall_clock:
      type: string
      required: no
      default: "04:00:00"
  node_templates:
    onedata_space:
      type: tosca.nodes.indigo.OnedataSpace
      properties:
        space: { get_input: onedata_space_name }
    qcg_job:
      type: tosca.nodes.indigo.Qcg.Job
      properties:
        note: "Script to submit a deep-oc application"
        executable: "deep-run.sh"
        arguments: [ "--model", "it's" ]
        std_outerr: log.txt
        total_nodes: { get_input: total_nodes }
        cores_per_node: { get_input: cores_per_node }
        memory_per_node: 16000
        gpus: { get_input: num_gpus }
        queue: { get_input: queue }
        wall_clock: { get_input: wall_clock }
        environment:
          DOCKER_IMAGE: { get_input: docker_image }
          ONECLIENT_ACCESS_TOKEN: { get_attribute : [ onedata_space, token ] }
          UDOCKER_RUN_COMMAND: { get_input: run_command }
          NUM_GPUS: { get_input: num_gpus }
)";

/// A Marathon app on a Docker box on an INDIGO Compute node that names its GPUs.
const char* const kComputeGpu = R"(tosca_definitions_version: tosca_simple_yaml_1_0
topology_template:
  inputs:
    gpu_model:
      type: string
      default: "Tesla V100"
  node_templates:
    Compute:
      type: tosca.nodes.indigo.Compute
      capabilities:
        host:
          properties:
            num_cpus: 8
            mem_size: "8 GB"
            num_gpus: 2
            gpu_vendor: NVIDIA
            gpu_model: { get_input: gpu_model }
            infiniband_support: true
        os:
          properties:
            type: linux
            gpu_driver: true
            cuda_support: true
            cuda_min_version: 11.2
        scalable:
          properties:
            count: 2
    Docker:
      type: tosca.nodes.indigo.Container.Runtime.Docker
      capabilities:
        host:
          properties:
            num_cpus: 0.5
      requirements:
      - host: Compute
    train:
      type: tosca.nodes.indigo.Container.Application.Docker.Chronos
      properties:
        command: "python train.py"
        retries: 3
        schedule: "R0/2025-12-25T17:22:00Z/PT1M"
      requirements:
      - host: Docker
      artifacts:
        image: { file: "registry.example.org/ml/train:1" }
)";

json yaml(const std::string& text) {
  auto y = parse_yaml(text, "test");
  EXPECT_TRUE(y.ok()) << y.error().message();
  return y.ok() ? *y : json();
}

json translated(const std::string& text, const json& inputs = nullptr) {
  auto r = tosca_job_body(yaml(text), inputs);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : json();
}

std::string error_of(const std::string& text, const json& inputs = nullptr) {
  auto r = tosca_job_body(yaml(text), inputs);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
  return r.error().message();
}

/// `text` with `from` replaced by `to` (once; `from` must be there).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ToscaTest, DeepsMesosGpuModuleIsAGpuJob) {
  json want = json::parse(R"({
    "name": "marathon", "image": "deephdc/deep-oc-mods:gpu",
    "command": ["/bin/sh", "-c", "deep-start -do"],
    "env": {"RCLONE_CONFIG_RSHARE_TYPE": "webdav",
            "RCLONE_CONFIG_RSHARE_URL": "https://nc.example.org/remote.php/webdav/",
            "DISABLE_AUTHENTICATION": "true",
            "APP_URL": "https://https://nc.example.org/remote.php/webdav/x"},
    "resources": {"cpus_per_task": 1, "memory_mb": 4096, "gpus": 1}})");
  EXPECT_EQ(translated(kMesosGpu), want);
}

TEST(ToscaTest, TheRequestsInputsOverrideTheDefaults) {
  json body = translated(kMesosGpu, {{"num_gpus", 2}, {"mem_size", "16 GiB"}, {"num_cpus", "4"}});
  EXPECT_EQ(body["resources"], json::parse(R"({"cpus_per_task": 4, "memory_mb": 17180,
                                                "gpus": 2})"));
  // No GPUs asked, none described.
  body = translated(kMesosGpu, {{"num_gpus", 0}});
  EXPECT_FALSE(body["resources"].contains("gpus"));
}

TEST(ToscaTest, AComputeHostNamesTheGpusAndTheCudaMinimum) {
  json body = translated(kComputeGpu);
  EXPECT_EQ(body, json::parse(R"({
    "name": "train", "image": "registry.example.org/ml/train:1",
    "command": ["/bin/sh", "-c", "python train.py"],
    "resources": {"nodes": 2, "tasks": 2, "cpus_per_task": 1, "memory_mb": 8000, "gpus": 4,
                  "gpu": {"vendor": "nvidia", "model": "Tesla V100", "cuda_min": "11.2"},
                  "infiniband": true}})"));
  // As the broker reads it: a V100 (not a V10), CUDA 11.2 at least.
  auto job = parse_broker_job(body);
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_EQ(job->need.gpu.models, std::vector<std::string>{"V100"});
  EXPECT_EQ(job->need.gpu.cuda_min, "11.2");
  EXPECT_EQ(job->need.gpus_per_node(), 2);
  EXPECT_TRUE(job->need.infiniband);
}

TEST(ToscaTest, DeepsQcgJobRunsItsExecutableInTheImage) {
  json body = translated(kQcgJob, {{"onedata_space_name", "space"}, {"num_gpus", 1}});
  EXPECT_EQ(body, json::parse(R"({
    "name": "qcg_job", "image": "deephdc/deep-oc-benchmarks_cnn:gpu",
    "command": ["/bin/sh", "-c", "deep-run.sh '--model' 'it'\\''s'"],
    "env": {"DOCKER_IMAGE": "deephdc/deep-oc-benchmarks_cnn:gpu",
            "UDOCKER_RUN_COMMAND": "deepaas-cli get_metadata", "NUM_GPUS": "1"},
    "resources": {"cpus_per_task": 2, "memory_mb": 16000, "walltime_s": 14400, "gpus": 1}})"));
  // A required input only a node Berth does not run reads is not asked for.
  EXPECT_TRUE(tosca_job_body(yaml(kQcgJob), nullptr).ok());
  // gpus is per node, as QCG's --gres=gpu:N.
  body = translated(kQcgJob, {{"num_gpus", 2}, {"total_nodes", 3}});
  EXPECT_EQ(body["resources"]["gpus"], 6);
  EXPECT_EQ(body["resources"]["nodes"], 3);
}

TEST(ToscaTest, BadTemplatesAreOneLineNamingTheNodeAndProperty) {
  const std::string p = "parse TOSCA template: ";
  struct Case {
    std::string text;
    json inputs;
    std::string message;
  };
  const std::string mesos = kMesosGpu;
  const std::string compute = kComputeGpu;
  for (const Case& c : std::vector<Case>{
           {mesos,
            {{"num_gpus", "two"}},
            p + "node Docker: host.num_gpus: two is not a whole number from 0 to 10000"},
           {mesos,
            {{"mem_size", 4096}},
            p + "node Docker: host.mem_size: 4096 is not a size such as \"8 GB\" (B, kB, KiB, "
                "MB, MiB, GB, GiB, TB, TiB)"},
           {edited(mesos, "num_cpus: { get_input: num_cpus }", "num_cpu: 2"), nullptr,
            p + "node Docker: host.num_cpu: is not a property of a host capability"},
           {edited(mesos, "enable_https: true", "enable_http: true"), nullptr,
            p + "node marathon: enable_http: is not a property of "
                "tosca.nodes.indigo.Container.Application.Docker.Marathon"},
           {mesos, {{"gpus", 1}}, p + "inputs.gpus: is not an input of the template"},
           {edited(mesos, "file: \"deephdc/deep-oc-mods:gpu\"", "file: \"\""), nullptr,
            p + "node marathon: artifacts.image: must name a container image (file: "
                "\"repository/image:tag\")"},
           {edited(mesos, "num_gpus: { get_input: num_gpus }",
                   "num_gpus: { get_attribute: [ Docker, gpus ] }"),
            nullptr, p + "node Docker: host.num_gpus: is only known once deployed (get_attribute)"},
           {edited(mesos, "default: \"deep-start -do\"", "description: none"), nullptr,
            p + "node marathon: command: input \"run_command\" is required and has no value"},
           {edited(mesos, "node: \"Docker\"", "node: \"Dokcer\""), nullptr,
            p + "node marathon: requirements.host: names \"Dokcer\", which is not a node of the "
                "template"},
           {compute,
            {{"gpu_model", "!V100"}},
            p + "node Compute: host.gpu_model: \"!V100\" is not a GPU name (a letter, then "
                "letters, digits, '-', '_', '.')"},
           {edited(compute, "gpu_vendor: NVIDIA", "gpu_vendor: Nvida"), nullptr,
            p + "node Compute: host.gpu_vendor: \"Nvida\" is not nvidia, amd or intel"},
           {edited(compute, "cuda_min_version: 11.2", "cuda_min_version: eleven"), nullptr,
            p + "node Compute: os.cuda_min_version: \"eleven\" is not a version (numbers between "
                "dots, such as \"12.2\")"},
           {edited(compute, "command: \"python train.py\"", "description: none"), nullptr,
            p + "node train: command: is required (a Chronos job runs a command)"},
           {edited(compute, "tosca.nodes.indigo.Container.Application.Docker.Chronos",
                   "tosca.nodes.indigo.Container.Application.Docker.Kubernetes"),
            nullptr,
            p + "topology_template.node_templates: has no job node: Berth runs one node of type "
                "tosca.nodes.indigo.Container.Application.Docker.Marathon, "
                "tosca.nodes.indigo.Container.Application.Docker.Chronos, "
                "tosca.nodes.indigo.Container.Application.Docker or tosca.nodes.indigo.Qcg.Job"},
           {edited(compute, "tosca.nodes.indigo.Container.Runtime.Docker",
                   "tosca.nodes.indigo.Container.Application.Docker.Marathon"),
            nullptr,
            p + "topology_template.node_templates: has 2 job nodes (Docker, train): Berth runs "
                "one job per template"},
           {edited(kQcgJob, "wall_clock: { get_input: wall_clock }", "wall_clock: 4h"), nullptr,
            p + "node qcg_job: wall_clock: \"4h\" is not hh:mm:ss"},
           {edited(kQcgJob, "DOCKER_IMAGE: { get_input: docker_image }", "A: b"), nullptr,
            p + "node qcg_job: artifacts.image: is required: Berth runs a job in a container "
                "image (or give environment.DOCKER_IMAGE, as DEEP's templates do)"},
           {"tosca_definitions_version: tosca_simple_yaml_1_0\n", nullptr,
            p + "topology_template: is required (a mapping with node_templates)"}}) {
    EXPECT_EQ(error_of(c.text, c.inputs), c.message);
  }
}

TEST(ToscaTest, ABodyIsReadAsJsonOrAsTosca) {
  // A JSON job body, as it is.
  auto r = read_job_body(R"({"image": "alpine", "resources": {"gpus": 1}})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->from_tosca);
  EXPECT_EQ(r->body, json::parse(R"({"image": "alpine", "resources": {"gpus": 1}})"));
  // YAML that is a TOSCA template.
  r = read_job_body(kMesosGpu);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->from_tosca);
  EXPECT_EQ(r->body, translated(kMesosGpu));
  // The JSON wrapper, with inputs and the broker's own fields.
  json wrapper = {{"template", kMesosGpu},
                  {"inputs", {{"num_gpus", 2}}},
                  {"placement", {{"sites", {"hpc-a"}}}},
                  {"name", "mods"}};
  r = read_job_body(wrapper.dump());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->from_tosca);
  EXPECT_EQ(r->body["resources"]["gpus"], 2);
  EXPECT_EQ(r->body["placement"], json::parse(R"({"sites": ["hpc-a"]})"));
  EXPECT_EQ(r->body["name"], "mods");
  // Neither: the caller's own "not a JSON object".
  r = read_job_body("image: alpine\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->body.is_discarded());
  // Mistakes.
  r = read_job_body(R"({"template": "x", "input": {}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "parse TOSCA request: input: is not a field of a TOSCA request (template, inputs, "
            "name, group, placement, failover)");
  r = read_job_body("tosca_definitions_version: tosca_simple_yaml_1_0\ntopology_template: [\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(r.error().message().rfind("parse TOSCA template: not YAML: ", 0), 0U)
      << r.error().message();
}

}  // namespace
}  // namespace berth::broker

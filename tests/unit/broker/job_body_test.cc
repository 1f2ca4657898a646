#include "broker/job_body.h"

#include <gtest/gtest.h>

namespace berth::broker {
namespace {

BrokerJob parsed(const std::string& text) {
  auto r = parse_broker_job(nlohmann::json::parse(text));
  EXPECT_TRUE(r.ok()) << text << ": " << r.error().message();
  return r.ok() ? *r : BrokerJob{};
}

std::string error_of(const std::string& text) {
  auto r = parse_broker_job(nlohmann::json::parse(text));
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
  return r.error().message();
}

/// A body with `resources` as given and an image.
std::string with_resources(const std::string& resources) {
  return R"({"image": "alpine", "resources": )" + resources + "}";
}

TEST(JobBodyTest, TheSmallestBodyTakesTheDefaults) {
  BrokerJob want;
  want.image = "alpine";
  EXPECT_EQ(parsed(R"({"image": "alpine"})"), want);
  EXPECT_EQ(want.name, "berthd-job");
  EXPECT_EQ(want.placement.strategy, "rank");
  EXPECT_EQ(want.failover.max_sites, 3);
}

TEST(JobBodyTest, TheFullBodyOfTheDesign) {
  BrokerJob j = parsed(R"({
    "name": "train", "image": "nvcr.io/nvidia/pytorch:24.01-py3", "command": ["python", "t.py"],
    "env": {"A": "1", "B": ""},
    "resources": {"nodes": 2, "tasks": 4, "gpus": 4, "cpus_per_task": 8, "memory_mb": 64000,
                  "walltime_s": 7200, "infiniband": true,
                  "gpu": {"vendor": "NVIDIA", "model": ["H100", "nvidia_a100_80gb"],
                          "memory_mb_min": 40000, "compute_capability_min": "8.0",
                          "cuda_min": "12.2", "driver_min": "535"}},
    "placement": {"sites": ["a", "b"], "exclude": ["c"], "prefer": {"b": 2, "a": -0.5},
                  "strategy": "race"},
    "failover": {"max_sites": 2, "pending_timeout_s": 600, "deadline_s": 3600}})");
  BrokerJob want;
  want.name = "train";
  want.image = "nvcr.io/nvidia/pytorch:24.01-py3";
  want.command = {"python", "t.py"};
  want.env = {{"A", "1"}, {"B", ""}};
  want.need.nodes = 2;
  want.need.tasks = 4;
  want.need.gpus = 4;
  want.need.cpus_per_task = 8;
  want.need.memory_mb = 64000;
  want.need.walltime_s = 7200;
  want.need.infiniband = true;
  want.need.gpu.vendor = "nvidia";
  want.need.gpu.models = {"H100", "A100-80GB"};
  want.need.gpu.memory_mib_min = 40000;
  want.need.gpu.compute_capability_min = "8.0";
  want.need.gpu.cuda_min = "12.2";
  want.need.gpu.driver_min = "535";
  want.placement.sites = {"a", "b"};
  want.placement.exclude = {"c"};
  want.placement.prefer = {{"a", -0.5}, {"b", 2}};
  want.placement.strategy = "race";
  want.failover.max_sites = 2;
  want.failover.pending_timeout_s = 600;
  want.failover.deadline_s = 3600;
  EXPECT_EQ(j, want);
  EXPECT_EQ(j.need.gpus_per_node(), 2);
}

TEST(JobBodyTest, GpusAsAShorthand) {
  Requirement r = parsed(with_resources(R"({"gpus": "A100:80GB:2"})")).need;
  EXPECT_EQ(r.gpus, 2);
  EXPECT_EQ(r.gpu.vendor, "nvidia");
  EXPECT_EQ(r.gpu.models, std::vector<std::string>{"A100"});
  EXPECT_EQ(r.gpu.memory_mib_min, 81920);

  r = parsed(with_resources(R"({"gpus": "A100:0.5"})")).need;
  EXPECT_EQ(r.gpus, 0);
  EXPECT_EQ(r.gpu_share, 0.5);

  r = parsed(with_resources(R"({"gpus": "24GB..48GB"})")).need;
  EXPECT_EQ(r.gpus, 1);
  EXPECT_EQ(r.gpu.vendor, "");
  EXPECT_EQ(r.gpu.memory_mib_min, 24576);
  EXPECT_EQ(r.gpu.memory_mib_max, 49152);

  r = parsed(with_resources(R"({"gpus": "H100,A100-80GB:4", "nodes": 2})")).need;
  EXPECT_EQ(r.gpus, 4);
  EXPECT_EQ(r.gpus_per_node(), 2);
  EXPECT_EQ(r.gpu.models, (std::vector<std::string>{"H100", "A100-80GB"}));
}

TEST(JobBodyTest, AShorthandMergesWithResourcesGpu) {
  Requirement r = parsed(with_resources(
                             R"({"gpus": "16GB..32GB:2",
                                 "gpu": {"model": "a100", "memory_mb_min": 20000, "cuda_min": "12.2"}})"))
                      .need;
  EXPECT_EQ(r.gpus, 2);
  EXPECT_EQ(r.gpu.vendor, "nvidia");  // from the model
  EXPECT_EQ(r.gpu.models, std::vector<std::string>{"A100"});
  EXPECT_EQ(r.gpu.memory_mib_min, 20000);  // both minimums hold: the larger
  EXPECT_EQ(r.gpu.memory_mib_max, 32768);
  EXPECT_EQ(r.gpu.cuda_min, "12.2");

  r = parsed(with_resources(R"({"gpus": "H100,A100:2", "gpu": {"model": ["A100", "h100"]}})")).need;
  EXPECT_EQ(r.gpu.models, (std::vector<std::string>{"A100", "H100"}));  // the same list

  r = parsed(with_resources(R"({"gpus": "amd:2", "gpu": {"vendor": "amd"}})")).need;
  EXPECT_EQ(r.gpu.vendor, "amd");

  EXPECT_EQ(error_of(with_resources(R"({"gpus": "H100:2", "gpu": {"vendor": "amd"}})")),
            "parse job body: resources.gpu.vendor: is amd, but resources.gpus (\"H100:2\") asks "
            "for nvidia");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": "A100:2", "gpu": {"model": "H100"}})")),
            "parse job body: resources.gpu.model: names H100, but resources.gpus (\"A100:2\") "
            "names A100: name the models in one place");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": "..32GB:2", "gpu": {"memory_mb_min": 40000}})")),
            "parse job body: resources.gpu.memory_mb_min: 40000 is above the most resources.gpus "
            "(\"..32GB:2\") allows (32768 MiB)");
}

TEST(JobBodyTest, ResourcesGpuAlone) {
  Requirement r = parsed(with_resources(R"({"gpus": 1, "gpu": {"model": "mi250x"}})")).need;
  EXPECT_EQ(r.gpu.vendor, "amd");
  EXPECT_EQ(r.gpu.models, std::vector<std::string>{"MI250X"});
  r = parsed(with_resources(R"({"gpus": 1, "gpu": {"model": ["H100", "MI300X"]}})")).need;
  EXPECT_EQ(r.gpu.vendor, "");  // two vendors: any
  r = parsed(with_resources(R"({"gpu_share": 0.25, "gpu": {"model": "A100"}})")).need;
  EXPECT_EQ(r.gpu_share, 0.25);
  r = parsed(with_resources(R"({"gpus": 1, "gpu": {"model": [], "cuda_min": ""}})")).need;
  EXPECT_EQ(r.gpu, GpuRequirement{});

  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"vendor": "arm"}})")),
            "parse job body: resources.gpu.vendor: \"arm\" is not nvidia, amd or intel");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"vendor": 1}})")),
            "parse job body: resources.gpu.vendor: must be a string");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"vendor": "amd", "model": "H100"}})")),
            "parse job body: resources.gpu.model: H100 is an nvidia GPU, not amd");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"model": 3}})")),
            "parse job body: resources.gpu.model: must be a GPU model name or a list of them");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"model": ["H100", ""]}})")),
            "parse job body: resources.gpu.model[1]: \"\" is not a GPU name (a letter, then "
            "letters, digits, '-', '_', '.')");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"model": "80GB"}})")),
            "parse job body: resources.gpu.model: \"80GB\" is not a GPU name (a letter, then "
            "letters, digits, '-', '_', '.')");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"memory_mb_min": -1}})")),
            "parse job body: resources.gpu.memory_mb_min: must be a whole number from 0 to "
            "1073741824");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"compute_capability_min": "8.x"}})")),
            "parse job body: resources.gpu.compute_capability_min: \"8.x\" is not a version "
            "(numbers between dots, such as \"12.2\")");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"cuda_min": "12..2"}})")),
            "parse job body: resources.gpu.cuda_min: \"12..2\" is not a version (numbers "
            "between dots, such as \"12.2\")");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"driver_min": 535}})")),
            "parse job body: resources.gpu.driver_min: must be a string");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": {"count": 2}})")),
            "parse job body: resources.gpu.count: is not a field of resources.gpu");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu": "H100"})")),
            "parse job body: resources.gpu: must be an object");
  EXPECT_EQ(error_of(with_resources(R"({"gpu": {"model": "H100"}})")),
            "parse job body: resources.gpu: describes GPUs but resources.gpus asks for none: "
            "give both");
}

TEST(JobBodyTest, BadResources) {
  EXPECT_EQ(error_of(with_resources(R"({"nodes": 0})")),
            "parse job body: resources.nodes: must be a whole number from 1 to 10000");
  EXPECT_EQ(error_of(with_resources(R"({"tasks": 1.5})")),
            "parse job body: resources.tasks: must be a whole number from 1 to 1000000");
  EXPECT_EQ(error_of(with_resources(R"({"cpus_per_task": "8"})")),
            "parse job body: resources.cpus_per_task: must be a whole number from 1 to 10000");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": -1})")),
            "parse job body: resources.gpus: must be a whole number from 0 to 10000 or a GPU "
            "spec such as \"A100:80GB:2\"");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": "A100:0"})")),
            "parse job body: resources.gpus: gpu spec \"A100:0\": a count must be at least 1");
  EXPECT_EQ(error_of(with_resources(R"({"gpu_share": 1})")),
            "parse job body: resources.gpu_share: must be a number above 0 and below 1");
  EXPECT_EQ(error_of(with_resources(R"({"memory_mb": -5})")),
            "parse job body: resources.memory_mb: must be a whole number from 0 to 1099511627776");
  EXPECT_EQ(error_of(with_resources(R"({"walltime_s": 40000000})")),
            "parse job body: resources.walltime_s: must be a whole number from 0 to 31622400");
  EXPECT_EQ(error_of(with_resources(R"({"infiniband": "yes"})")),
            "parse job body: resources.infiniband: must be true or false");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 2, "gpu_share": 0.5})")),
            "parse job body: resources: asks for both gpus and gpu_share (a share is of one GPU)");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": "A100:0.5", "gpu_share": 0.5})")),
            "parse job body: resources.gpu_share: is given, but resources.gpus (\"A100:0.5\") "
            "gives a share too");
  EXPECT_EQ(error_of(with_resources(R"({"gpus": 1, "gpu_model": "h100"})")),
            "parse job body: resources.gpu_model: is not a field of a broker job (name GPU "
            "models in resources.gpu.model)");
  EXPECT_EQ(error_of(with_resources(R"({"gpu_count": 1})")),
            "parse job body: resources.gpu_count: is not a field of a broker job");
  EXPECT_EQ(error_of(with_resources("[]")), "parse job body: resources: must be an object");
}

TEST(JobBodyTest, BadTopLevelFields) {
  EXPECT_EQ(error_of("[]"), "parse job body: it is not a JSON object");
  EXPECT_EQ(error_of("{}"), "parse job body: image: is required");
  EXPECT_EQ(error_of(R"({"image": ""})"), "parse job body: image: is required");
  EXPECT_EQ(error_of(R"({"image": 3})"), "parse job body: image: must be a string");
  EXPECT_EQ(error_of(R"({"image": "a", "name": null})"), "parse job body: name: must be a string");
  EXPECT_EQ(error_of(R"({"image": "a", "command": "ls"})"),
            "parse job body: command: must be a list of strings");
  EXPECT_EQ(error_of(R"({"image": "a", "command": ["ls", 1]})"),
            "parse job body: command[1]: must be a string");
  EXPECT_EQ(error_of(R"({"image": "a", "command": ["l\u0000s"]})"),
            "parse job body: command[0]: holds a NUL byte");
  EXPECT_EQ(error_of(R"({"image": "a", "env": []})"), "parse job body: env: must be an object");
  EXPECT_EQ(error_of(R"({"image": "a", "env": {"A=B": "1"}})"),
            "parse job body: env: names a variable \"A=B\"");
  EXPECT_EQ(error_of(R"({"image": "a", "env": {"A": 1}})"),
            "parse job body: env.A: must be a string");
  EXPECT_EQ(error_of(R"({"image": "a", "mounts": [1]})"),
            "parse job body: mounts[0]: must be a string");
  EXPECT_EQ(error_of(R"({"image": "a", "class": "interactive"})"),
            "parse job body: class: is \"interactive\", not \"batch\" or \"cloud\"");
  EXPECT_EQ(error_of(R"({"image": "a", "tags": []})"),
            "parse job body: tags: is not a field of a broker job");
}

TEST(JobBodyTest, BerthdsOwnFieldsGoToTheSiteAsGiven) {
  auto job = parse_broker_job(nlohmann::json::parse(
      R"({"image": "a", "mounts": ["/data:/data:ro"], "workdir": "/w", "group": "/vo/ml",
          "class": "cloud"})"));
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_EQ(job->mounts, std::vector<std::string>{"/data:/data:ro"});
  EXPECT_EQ(job->workdir, "/w");
  EXPECT_EQ(job->group, "/vo/ml");
  EXPECT_EQ(job->job_class, "cloud");
  EXPECT_EQ(parse_broker_job(nlohmann::json::parse(R"({"image": "a"})"))->job_class, "batch");
}

TEST(JobBodyTest, BadPlacement) {
  const std::string pre = R"({"image": "a", "placement": )";
  EXPECT_EQ(error_of(pre + "1}"), "parse job body: placement: must be an object");
  EXPECT_EQ(error_of(pre + R"({"sites": "a"}})"),
            "parse job body: placement.sites: must be a list of strings");
  EXPECT_EQ(error_of(pre + R"({"sites": ["a", ""]}})"),
            "parse job body: placement.sites[1]: is empty");
  EXPECT_EQ(error_of(pre + R"({"exclude": [2]}})"),
            "parse job body: placement.exclude[0]: must be a string");
  EXPECT_EQ(error_of(pre + R"({"sites": ["a", "b"], "exclude": ["b"]}})"),
            "parse job body: placement.exclude: names \"b\", which placement.sites asks for");
  EXPECT_EQ(error_of(pre + R"({"prefer": ["a"]}})"),
            "parse job body: placement.prefer: must be an object");
  EXPECT_EQ(error_of(pre + R"({"prefer": {"a": "2"}}})"),
            "parse job body: placement.prefer.a: must be a number");
  EXPECT_EQ(error_of(pre + R"({"prefer": {"": 1}}})"),
            "parse job body: placement.prefer: names an empty site");
  EXPECT_EQ(error_of(pre + R"({"strategy": "first"}})"),
            "parse job body: placement.strategy: \"first\" is not \"rank\" or \"race\"");
  EXPECT_EQ(error_of(pre + R"({"order": []}})"),
            "parse job body: placement.order: is not a field of placement");
}

TEST(JobBodyTest, BadFailover) {
  const std::string pre = R"({"image": "a", "failover": )";
  EXPECT_EQ(error_of(pre + "[]}"), "parse job body: failover: must be an object");
  EXPECT_EQ(error_of(pre + R"({"max_sites": 0}})"),
            "parse job body: failover.max_sites: must be a whole number from 1 to 100");
  EXPECT_EQ(error_of(pre + R"({"pending_timeout_s": 0}})"),
            "parse job body: failover.pending_timeout_s: must be a whole number from 1 to "
            "31622400");
  EXPECT_EQ(error_of(pre + R"({"deadline_s": "1d"}})"),
            "parse job body: failover.deadline_s: must be a whole number from 1 to 31622400");
  EXPECT_EQ(error_of(pre + R"({"on": ["refused"]}})"),
            "parse job body: failover.on: is not a field of failover");
}

}  // namespace
}  // namespace berth::broker

// A job request's partition and its GPU type (gateway/job_request.h): resources.partition read,
// checked against the site's partitions and sent to Slurm as the job's; resources.gpu_type as
// another name of resources.gpu_model.
#include "gateway/job_request.h"

#include <gtest/gtest.h>

#include "gateway/slurm_v0038.h"
#include "gateway/slurm_v0041.h"

namespace berth::gateway {
namespace {

using json = nlohmann::json;

TEST(GatewayJobRequest, PartitionGoesToSlurmAsTheJobsPartition) {
  auto r = parse_job_request(json::parse(R"({"image": "x", "resources": {"partition": "long"}})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->partition, "long");
  SlurmConfig slurm;
  slurm.partition = "gpu";
  SlurmJobSpec s = slurm_spec(*r, 1, "c", slurm);
  EXPECT_EQ(s.partition, "long");
  EXPECT_EQ(submit_body_v0038(s)["job"]["partition"], "long");
  EXPECT_EQ(submit_body_v0041(s)["job"]["partition"], "long");
  // Without one, the configured partition, as before.
  auto plain = parse_job_request(json::parse(R"({"image": "x"})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->partition, "");
  EXPECT_EQ(slurm_spec(*plain, 1, "c", slurm).partition, "gpu");
  // The job's answer names the partition it asked for, only then.
  JobRecord j;
  j.request = R"({"image": "x", "resources": {"partition": "long"}})";
  EXPECT_EQ(job_json(j)["partition"], "long");
  j.request = R"({"image": "x"})";
  EXPECT_FALSE(job_json(j).contains("partition"));

  const std::pair<const char*, const char*> bad[] = {
      {R"({"image": "x", "resources": {"partition": "a,b"}})",
       "parse job request: \"resources.partition\" is not a partition name (letters, digits, "
       "'_', '.', '-')"},
      {R"({"image": "x", "resources": {"partition": ""}})",
       "parse job request: \"resources.partition\" is not a partition name (letters, digits, "
       "'_', '.', '-')"},
      {R"({"image": "x", "resources": {"partition": ["gpu"]}})",
       "parse job request: \"resources.partition\" is not a string"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_job_request(json::parse(text));
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayJobRequest, PartitionMustBeOneOfTheSites) {
  auto r = parse_job_request(json::parse(R"({"image": "x", "resources": {"partition": "x"}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(check_partition(*r, {"a", "x"}).ok());
  auto no = check_partition(*r, {"a", "b"});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(no.error().detail,
            "resources.partition: \"x\" is not one of this site's partitions (a, b)");
  no = check_partition(*r, {});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().detail,
            "resources.partition: \"x\" is not one of this site's partitions (it names none in "
            "[slurm] partitions)");
  // A request that names none runs in [slurm] partition, whatever the list.
  EXPECT_TRUE(check_partition(*parse_job_request(json::parse(R"({"image": "x"})")), {}).ok());
}

TEST(GatewayJobRequest, GpuTypeIsAnotherNameOfGpuModel) {
  auto r = parse_job_request(
      json::parse(R"({"image": "x", "resources": {"gpus": 2, "gpu_type": "a100"}})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->gpu_model, "a100");
  EXPECT_EQ(slurm_spec(*r, 1, "c", SlurmConfig{}).gpu_type, "a100");
  EXPECT_TRUE(check_gpu_model(*r, {"a100"}).ok());
  EXPECT_FALSE(check_gpu_model(*r, {"t4"}).ok());

  const std::pair<const char*, const char*> bad[] = {
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_model": "a100", "gpu_type": "a100"}})",
       "parse job request: \"resources\" names both gpu_model and gpu_type (one is the other's "
       "name): give one"},
      {R"({"image": "x", "resources": {"gpu_type": "a100"}})",
       "parse job request: \"resources.gpu_type\" names a GPU model but resources.gpus asks for "
       "no GPUs: give both"},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_type": "a100:2"}})",
       "parse job request: \"resources.gpu_type\" is not a GPU model name (letters, digits, "
       "'_', '.', '-')"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_job_request(json::parse(text));
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

}  // namespace
}  // namespace berth::gateway

#include "slurm/berth_output.h"

#include <gtest/gtest.h>

namespace berth::slurm {
namespace {

TEST(SlurmBerthOutput, AContainerFromInspect) {
  // The keys berth inspect --type=container prints (cli/context.cc container_json).
  std::string json = R"J({"id":"abc","names":["keep.n1"],"name":"keep.n1","status":"running",
      "rootfs":"/home/u/.local/share/berth/containers/abc/rootfs","config":{"WorkingDir":"/etc",
      "Env":["PATH=/bin"]},"exit_code":null,"pid":4242,"error":null})J";
  ContainerFacts f;
  ASSERT_EQ(parse_container(json, &f), "");
  EXPECT_EQ(f.status, ContainerStatus::kRunning);
  EXPECT_EQ(f.pid, 4242);
  EXPECT_EQ(f.rootfs, "/home/u/.local/share/berth/containers/abc/rootfs");
  EXPECT_EQ(f.workdir, "/etc");
  EXPECT_EQ(f.error, "");
  ASSERT_EQ(parse_container(R"J({"status":"exited","pid":0,"config":null,
      "error":"mount volume /nonexistent:/x: bind source path does not exist"})J",
                            &f),
            "");
  EXPECT_EQ(f.status, ContainerStatus::kExited);
  EXPECT_EQ(f.pid, 0);
  EXPECT_EQ(f.workdir, "");
  EXPECT_EQ(f.error, "mount volume /nonexistent:/x: bind source path does not exist");
  EXPECT_EQ(parse_container(R"J({"status":"paused","pid":0})J", &f),
            "berth inspect: unknown container status 'paused'");
  EXPECT_EQ(parse_container(R"J({"status":"running"})J", &f), "berth inspect: no pid");
  EXPECT_EQ(parse_container("4242 running", &f), "berth inspect: not a JSON object");
}

TEST(SlurmBerthOutput, NamesFromPs) {
  std::vector<std::string> names;
  ASSERT_EQ(parse_container_names(R"J([{"name":"slurm-5.0.n1","names":["slurm-5.0.n1"]},
      {"name":"","names":[]},{"name":"keep.n1"}])J",
                                  &names),
            "");
  EXPECT_EQ(names, (std::vector<std::string>{"slurm-5.0.n1", "keep.n1"}));
  ASSERT_EQ(parse_container_names("[]", &names), "");
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(parse_container_names("slurm-5.0.n1\n", &names), "berth ps --json: not a JSON array");
}

TEST(SlurmBerthOutput, TheErrorIsTheLastJsonErrorObject) {
  // What berth --error-format=json prints, after a warning of its own (text).
  BerthError e = parse_berth_error(
      "berth: warning: something\n"
      R"J({"error":{"message":"find container x.n1: no such container","code":"not_found"}})J"
      "\n");
  EXPECT_EQ(e.message, "find container x.n1: no such container");
  EXPECT_EQ(e.code, "not_found");
  // The hint is for people; the code and message are what the plugin reads.
  e = parse_berth_error(
      R"J({"error":{"message":"pull x: (HTTP 401)","code":"http","hint":"log in"}})J");
  EXPECT_EQ(e.message, "pull x: (HTTP 401)");
  EXPECT_EQ(e.code, "http");
  // A berth that could say nothing as JSON: its last line, as it is, and no code.
  e = parse_berth_error("something went wrong\n\n");
  EXPECT_EQ(e.message, "something went wrong");
  EXPECT_EQ(e.code, "");
  // A workload's line that looks like JSON but is no error object does not count.
  e = parse_berth_error(R"J({"error":"not an object"})J");
  EXPECT_EQ(e.message, R"J({"error":"not an object"})J");
  EXPECT_EQ(e.code, "");
  EXPECT_EQ(parse_berth_error("").message, "");
}

}  // namespace
}  // namespace berth::slurm

#include "broker/gpu_spec.h"

#include <gtest/gtest.h>

namespace berth::broker {
namespace {

GpuSpec spec(std::string vendor, std::vector<std::string> models, int64_t min, int64_t max,
             int count, double share = 0) {
  GpuSpec s;
  s.gpu.vendor = std::move(vendor);
  s.gpu.models = std::move(models);
  s.gpu.memory_mib_min = min;
  s.gpu.memory_mib_max = max;
  s.count = count;
  s.share = share;
  return s;
}

GpuSpec parsed(std::string_view text) {
  auto r = parse_gpu_spec(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.error().message();
  return r.ok() ? *r : GpuSpec{};
}

std::string error_of(std::string_view text) {
  auto r = parse_gpu_spec(text);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
  return r.error().message();
}

TEST(GpuSpecTest, NamesMemoryAndCount) {
  EXPECT_EQ(parsed("A100:80GB:2"), spec("nvidia", {"A100"}, 81920, 0, 2));
  EXPECT_EQ(parsed("H100,A100-80GB:4"), spec("nvidia", {"H100", "A100-80GB"}, 0, 0, 4));
  EXPECT_EQ(parsed("nvidia:L40S:1"), spec("nvidia", {"L40S"}, 0, 0, 1));
  EXPECT_EQ(parsed("A100"), spec("nvidia", {"A100"}, 0, 0, 1));  // one GPU when no count
  EXPECT_EQ(parsed("a100_80gb:8"), spec("nvidia", {"A100-80GB"}, 0, 0, 8));
  EXPECT_EQ(parsed("A10,A10G:2"), spec("nvidia", {"A10", "A10G"}, 0, 0, 2));
  EXPECT_EQ(parsed("H100,h100:2"), spec("nvidia", {"H100"}, 0, 0, 2));  // one name once
  EXPECT_EQ(parsed(" H100 : 2 "), spec("nvidia", {"H100"}, 0, 0, 2));
}

TEST(GpuSpecTest, ACountAloneAndAShare) {
  EXPECT_EQ(parsed("2"), spec("", {}, 0, 0, 2));
  EXPECT_EQ(parsed("A100:0.5"), spec("nvidia", {"A100"}, 0, 0, 0, 0.5));
  EXPECT_EQ(parsed("0.25"), spec("", {}, 0, 0, 0, 0.25));
  EXPECT_EQ(parsed("A100:2.0"), spec("nvidia", {"A100"}, 0, 0, 2));
  EXPECT_EQ(parsed("10000"), spec("", {}, 0, 0, 10000));
}

TEST(GpuSpecTest, MemoryRangesAndUnits) {
  EXPECT_EQ(parsed("24GB..48GB:2"), spec("", {}, 24576, 49152, 2));
  EXPECT_EQ(parsed("16GB..:1"), spec("", {}, 16384, 0, 1));
  EXPECT_EQ(parsed("..48GB"), spec("", {}, 0, 49152, 1));
  EXPECT_EQ(parsed("16GB..32"), spec("", {}, 16384, 32768, 1));  // the bare bound is GB
  EXPECT_EQ(parsed("nvidia:16GB"), spec("nvidia", {}, 16384, 0, 1));
  EXPECT_EQ(parsed("512MB"), spec("", {}, 512, 0, 1));
  EXPECT_EQ(parsed("0.5GB"), spec("", {}, 512, 0, 1));
  EXPECT_EQ(parsed("16 Gb"), spec("", {}, 16384, 0, 1));
  EXPECT_EQ(parsed("1TB"), spec("", {}, 1048576, 0, 1));
  EXPECT_EQ(parsed("80GiB:2"), spec("", {}, 81920, 0, 2));
}

TEST(GpuSpecTest, TheVendorGivenOrInferred) {
  EXPECT_EQ(parsed("MI300X:amd"), spec("amd", {"MI300X"}, 0, 0, 1));  // any order
  EXPECT_EQ(parsed("Nvidia"), spec("nvidia", {}, 0, 0, 1));
  EXPECT_EQ(parsed("AMD:MI250X:4"), spec("amd", {"MI250X"}, 0, 0, 4));
  EXPECT_EQ(parsed("mi250:2"), spec("amd", {"MI250"}, 0, 0, 2));
  // Models of two vendors, or of an unknown one, imply none.
  EXPECT_EQ(parsed("H100,MI300X:2"), spec("", {"H100", "MI300X"}, 0, 0, 2));
  EXPECT_EQ(parsed("H100,TPU-V5P"), spec("", {"H100", "TPU-V5P"}, 0, 0, 1));
  EXPECT_EQ(parsed("nvidia:H100,TPU-V5P"), spec("nvidia", {"H100", "TPU-V5P"}, 0, 0, 1));
}

TEST(GpuSpecTest, BadCounts) {
  EXPECT_EQ(error_of("A100:0"), "parse gpu spec \"A100:0\": a count must be at least 1");
  EXPECT_EQ(error_of("0.0"), "parse gpu spec \"0.0\": a count must be at least 1");
  EXPECT_EQ(error_of("A100:1.5"),
            "parse gpu spec \"A100:1.5\": a count above 1 must be a whole number (below 1 it is "
            "a share of one GPU)");
  EXPECT_EQ(error_of("10001"), "parse gpu spec \"10001\": a count must be at most 10000");
  EXPECT_EQ(error_of("A100:2:3"),
            "parse gpu spec \"A100:2:3\": a count is given twice (\"2\" and \"3\")");
  EXPECT_EQ(error_of("A100:1..4"),
            "parse gpu spec \"A100:1..4\": a count is one number, not a range (\"1..4\")");
  EXPECT_EQ(error_of("3..1"),
            "parse gpu spec \"3..1\": a count is one number, not a range (\"3..1\")");
  EXPECT_EQ(error_of("A100:-1"),
            "parse gpu spec \"A100:-1\": \"-1\" is not a GPU name (a letter, then letters, "
            "digits, '-', '_', '.')");
}

TEST(GpuSpecTest, BadMemory) {
  EXPECT_EQ(error_of("1.5xb"),
            "parse gpu spec \"1.5xb\": \"1.5xb\" is not a count, a memory size or a GPU name");
  EXPECT_EQ(error_of("0GB"),
            "parse gpu spec \"0GB\": a memory size must be at least 1MB (\"0GB\")");
  EXPECT_EQ(error_of("2000TB"),
            "parse gpu spec \"2000TB\": a memory size must be at most 1024TB (\"2000TB\")");
  EXPECT_EQ(error_of("48GB..24GB"),
            "parse gpu spec \"48GB..24GB\": the memory range \"48GB..24GB\" has its minimum above "
            "its maximum");
  EXPECT_EQ(error_of(".."), "parse gpu spec \"..\": the range \"..\" has no bounds");
  EXPECT_EQ(error_of("1...3GB"),
            "parse gpu spec \"1...3GB\": \"1...3GB\" is not a memory range such as 16GB..32GB");
  EXPECT_EQ(error_of("1...3"),
            "parse gpu spec \"1...3\": \"1...3\" is not a memory range such as 16GB..32GB");
  EXPECT_EQ(error_of("16GB:32GB"),
            "parse gpu spec \"16GB:32GB\": a memory size is given twice (\"16GB\" and \"32GB\")");
}

TEST(GpuSpecTest, BadNamesVendorsAndParts) {
  EXPECT_EQ(error_of(""), "parse gpu spec \"\": it is empty");
  EXPECT_EQ(error_of("  "), "parse gpu spec \"  \": it is empty");
  EXPECT_EQ(error_of("A100:"),
            "parse gpu spec \"A100:\": it has an empty part (between ':' or at an end)");
  EXPECT_EQ(error_of("A100,:2"),
            "parse gpu spec \"A100,:2\": it has an empty GPU name in \"A100,\"");
  EXPECT_EQ(
      error_of("Nvidia:A100:2:AMD"),
      "parse gpu spec \"Nvidia:A100:2:AMD\": a vendor is given twice (\"Nvidia\" and \"AMD\")");
  EXPECT_EQ(error_of("amd:H100"), "parse gpu spec \"amd:H100\": H100 is an nvidia GPU, not amd");
  EXPECT_EQ(error_of("A100:H100"),
            "parse gpu spec \"A100:H100\": a list of GPU names is given twice (\"A100\" and "
            "\"H100\")");
  EXPECT_EQ(error_of("H100,nvidia"),
            "parse gpu spec \"H100,nvidia\": \"nvidia\" is a vendor, not a GPU name");
  EXPECT_EQ(error_of("A100/80"),
            "parse gpu spec \"A100/80\": \"A100/80\" is not a GPU name (a letter, then letters, "
            "digits, '-', '_', '.')");
}

TEST(GpuSpecTest, SettleGpuVendor) {
  GpuRequirement g;
  g.models = {"H100", "A100-80GB"};
  EXPECT_EQ(settle_gpu_vendor(g), "");
  EXPECT_EQ(g.vendor, "nvidia");
  g.models = {"MI300X"};
  EXPECT_EQ(settle_gpu_vendor(g), "MI300X is an amd GPU, not nvidia");
  g.vendor = "";
  g.models = {"MI300X", "H100"};
  EXPECT_EQ(settle_gpu_vendor(g), "");
  EXPECT_EQ(g.vendor, "");
  g.models = {};
  EXPECT_EQ(settle_gpu_vendor(g), "");
  EXPECT_EQ(g.vendor, "");
}

}  // namespace
}  // namespace berth::broker

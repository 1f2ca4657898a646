#include "broker/gpu_names.h"

#include <gtest/gtest.h>

namespace berth::broker {
namespace {

NodeClass published(std::string model, std::string type = "", int64_t mib = 0) {
  NodeClass c;
  c.gpu_model = std::move(model);
  c.gpu_type = std::move(type);
  c.gpu_memory_mib = mib;
  return c;
}

NodeClass gres(std::string type, int64_t mib = 0) {
  return published("", std::move(type), mib);
}

TEST(GpuNamesTest, CanonicalNamesOfWhatSitesPublish) {
  EXPECT_EQ(canonical_gpu_name("NVIDIA H100 80GB HBM3"), "H100-80GB");
  EXPECT_EQ(canonical_gpu_name("NVIDIA A100-SXM4-80GB"), "A100-80GB");
  EXPECT_EQ(canonical_gpu_name("NVIDIA A100-PCIE-40GB"), "A100-40GB");
  EXPECT_EQ(canonical_gpu_name("Tesla V100-SXM2-16GB"), "V100-16GB");
  EXPECT_EQ(canonical_gpu_name("Tesla V100-PCIE-16GB"), "V100-16GB");
  EXPECT_EQ(canonical_gpu_name("NVIDIA L40S"), "L40S");
  EXPECT_EQ(canonical_gpu_name("NVIDIA L4"), "L4");
  EXPECT_EQ(canonical_gpu_name("NVIDIA GeForce RTX 4090"), "RTX4090");
  EXPECT_EQ(canonical_gpu_name("NVIDIA RTX A6000"), "RTXA6000");
  EXPECT_EQ(canonical_gpu_name("AMD Instinct MI250X"), "MI250X");
  EXPECT_EQ(canonical_gpu_name("NVIDIA H200"), "H200");
  EXPECT_EQ(canonical_gpu_name("NVIDIA H100 PCIe"), "H100");
  EXPECT_EQ(canonical_gpu_name("NVIDIA H100 NVL"), "H100");
}

TEST(GpuNamesTest, CanonicalNamesOfGresTypesAndWhatUsersType) {
  EXPECT_EQ(canonical_gpu_name("h100"), "H100");
  EXPECT_EQ(canonical_gpu_name("a100"), "A100");
  EXPECT_EQ(canonical_gpu_name("l40s"), "L40S");
  EXPECT_EQ(canonical_gpu_name("mi250"), "MI250");
  EXPECT_EQ(canonical_gpu_name("nvidia_h100_80gb_hbm3"), "H100-80GB");
  EXPECT_EQ(canonical_gpu_name("tesla_v100_pcie_32gb"), "V100-32GB");
  EXPECT_EQ(canonical_gpu_name("a100_80g"), "A100-80GB");
  EXPECT_EQ(canonical_gpu_name("rtx_4090"), "RTX4090");
  EXPECT_EQ(canonical_gpu_name("a100-80gb"), "A100-80GB");
  EXPECT_EQ(canonical_gpu_name(" A100-80GB "), "A100-80GB");
  EXPECT_EQ(canonical_gpu_name("A100-80GB"), "A100-80GB");  // a canonical name stays as it is
  EXPECT_EQ(canonical_gpu_name("GH200"), "GH200");
  EXPECT_EQ(canonical_gpu_name("NVIDIA"), "NVIDIA");  // nothing but a vendor: not lost
  EXPECT_EQ(canonical_gpu_name(""), "");
  EXPECT_EQ(canonical_gpu_name(" - "), "");
}

TEST(GpuNamesTest, VendorOfACanonicalModel) {
  EXPECT_EQ(gpu_vendor_of("H100"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("A100-80GB"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("L4"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("T4"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("RTX4090"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("GB200"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("MI250X"), "amd");
  EXPECT_EQ(gpu_vendor_of("MI300X"), "amd");
  EXPECT_EQ(gpu_vendor_of("GAUDI2"), "intel");
  EXPECT_EQ(gpu_vendor_of("MAX-1550"), "intel");
  EXPECT_EQ(gpu_vendor_of("A770"), "intel");
  EXPECT_EQ(gpu_vendor_of("B580"), "intel");
  EXPECT_EQ(gpu_vendor_of("A30"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("A800"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("A6000"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("B200"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("B300"), "nvidia");
  EXPECT_EQ(gpu_vendor_of("TPU-V5P"), "");
  EXPECT_EQ(gpu_vendor_of(""), "");
}

// The pairs a user is hurt by when they match, each tried both ways, through the published
// model and through the GRES type.
TEST(GpuNamesTest, NeighbouringModelsDoNotMatch) {
  const std::pair<const char*, const char*> kApart[] = {
      {"L4", "L40"},   {"L4", "L40S"},   {"L40", "L40S"}, {"A10", "A100"},
      {"V100", "V10"}, {"H200", "H100"}, {"A10", "A10G"}, {"MI250", "MI250X"},
  };
  for (const auto& [a, b] : kApart) {
    EXPECT_FALSE(gpu_model_matches(a, published(b))) << a << " ~ " << b;
    EXPECT_FALSE(gpu_model_matches(b, published(a))) << b << " ~ " << a;
    EXPECT_FALSE(gpu_model_matches(a, gres(b))) << a << " ~ gres " << b;
    EXPECT_FALSE(gpu_model_matches(b, gres(a))) << b << " ~ gres " << a;
    EXPECT_TRUE(gpu_model_matches(a, published(a))) << a;
    EXPECT_TRUE(gpu_model_matches(b, gres(b))) << b;
  }
  EXPECT_FALSE(gpu_model_matches("L4", published("NVIDIA L40S")));
  EXPECT_FALSE(gpu_model_matches("L40S", published("NVIDIA L4")));
  EXPECT_FALSE(gpu_model_matches("H100", published("NVIDIA H200")));
  EXPECT_FALSE(gpu_model_matches("H200", published("NVIDIA H100 80GB HBM3")));
  EXPECT_FALSE(gpu_model_matches("A10", published("NVIDIA A100-SXM4-80GB")));
  EXPECT_FALSE(gpu_model_matches("A100", gres("a10")));
  EXPECT_FALSE(gpu_model_matches("V10", published("Tesla V100-SXM2-16GB")));
  EXPECT_FALSE(gpu_model_matches("V100", gres("v10")));
}

TEST(GpuNamesTest, MemoryVariantsInTheName) {
  const NodeClass a80 = published("NVIDIA A100-SXM4-80GB");
  const NodeClass a40 = published("NVIDIA A100-PCIE-40GB");
  EXPECT_TRUE(gpu_model_matches("A100-80GB", a80));
  EXPECT_FALSE(gpu_model_matches("A100-80GB", a40));
  EXPECT_TRUE(gpu_model_matches("A100-40GB", a40));
  EXPECT_FALSE(gpu_model_matches("A100-40GB", a80));
  // A model without a variant matches every variant.
  EXPECT_TRUE(gpu_model_matches("A100", a80));
  EXPECT_TRUE(gpu_model_matches("A100", a40));
  EXPECT_TRUE(gpu_model_matches("H100", published("NVIDIA H100 80GB HBM3")));
  EXPECT_FALSE(gpu_model_matches("V100-32GB", gres("tesla_v100_pcie_16gb")));
  EXPECT_TRUE(gpu_model_matches("V100-16GB", gres("tesla_v100_pcie_16gb")));
  // The name's variant wins over a published memory that disagrees.
  EXPECT_FALSE(gpu_model_matches("A100-40GB", published("NVIDIA A100-SXM4-80GB", "", 40536)));
}

TEST(GpuNamesTest, MemoryVariantsFromThePublishedMemory) {
  // NVML's sizes: a little under the nominal one.
  EXPECT_TRUE(gpu_model_matches("A100-80GB", gres("a100", 81559)));
  EXPECT_FALSE(gpu_model_matches("A100-40GB", gres("a100", 81559)));
  EXPECT_TRUE(gpu_model_matches("A100-40GB", gres("a100", 40536)));
  EXPECT_FALSE(gpu_model_matches("A100-80GB", gres("a100", 40536)));
  EXPECT_TRUE(gpu_model_matches("A100-80GB", gres("a100", 81920)));
  EXPECT_TRUE(gpu_model_matches("H200-141GB", published("NVIDIA H200", "", 143771)));
  EXPECT_TRUE(gpu_model_matches("L40S-48GB", published("NVIDIA L40S", "", 46068)));
  EXPECT_FALSE(gpu_model_matches("L40S-48GB", published("NVIDIA L40S", "", 40960)));
  EXPECT_TRUE(gpu_model_matches("H100-94GB", published("NVIDIA H100 NVL", "", 95830)));
  EXPECT_FALSE(gpu_model_matches("H100-80GB", published("NVIDIA H100 NVL", "", 95830)));
  // Unknown memory never passes a variant asked for; it passes the model.
  EXPECT_FALSE(gpu_model_matches("A100-80GB", gres("a100")));
  EXPECT_TRUE(gpu_model_matches("A100", gres("a100")));
}

TEST(GpuNamesTest, ThePublishedModelBeforeTheGresType) {
  EXPECT_TRUE(gpu_model_matches("H100", published("NVIDIA H100 80GB HBM3", "gpu")));
  EXPECT_FALSE(gpu_model_matches("H100", published("NVIDIA H200", "h100")));
  EXPECT_TRUE(gpu_model_matches("H100", gres("h100")));
  EXPECT_TRUE(gpu_model_matches("l40s", gres("L40S")));               // `wanted` in any spelling
  EXPECT_FALSE(gpu_model_matches("H100", published("", "", 81559)));  // nothing published
  EXPECT_FALSE(gpu_model_matches("", gres("h100")));
}

}  // namespace
}  // namespace berth::broker

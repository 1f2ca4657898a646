#include "devices/rdma.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

/// A host with two HCAs as the kernel lays them out: mlx5_0 (mlx5_core, uverbs1, umad0/issm0)
/// and rxe0 (soft RoCE: no PCI driver, uverbs0), rdma_cm, stand-in device nodes.
void fabricate(const fs::path& root) {
  fs::path dev = root / "sys/devices";
  fs::path pci = dev / "pci0000:00/0000:00:02.0";
  fs::create_directories(root / "sys/bus/pci/drivers/mlx5_core");
  fs::create_directories(pci);
  fs::create_symlink("../../../bus/pci/drivers/mlx5_core", pci / "driver");
  put(pci / "infiniband/mlx5_0/node_guid", "0c42:a103:0016:054c\n");
  put(pci / "infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  put(pci / "infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  put(pci / "infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
  fs::create_symlink("../../../0000:00:02.0", pci / "infiniband/mlx5_0/device");
  put(pci / "infiniband_verbs/uverbs1/ibdev", "mlx5_0\n");
  put(pci / "infiniband_mad/umad0/ibdev", "mlx5_0\n");
  put(pci / "infiniband_mad/issm0/ibdev", "mlx5_0\n");
  put(dev / "virtual/infiniband/rxe0/node_guid", "5054:00ff:fe12:3456\n");
  put(dev / "virtual/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
  put(dev / "virtual/infiniband_verbs/uverbs0/ibdev", "rxe0\n");
  fs::path cls = root / "sys/class";
  fs::create_directories(cls / "infiniband");
  fs::create_directories(cls / "infiniband_verbs");
  fs::create_directories(cls / "infiniband_mad");
  fs::create_symlink("../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0",
                     cls / "infiniband/mlx5_0");
  fs::create_symlink("../../devices/virtual/infiniband/rxe0", cls / "infiniband/rxe0");
  fs::create_symlink("../../devices/pci0000:00/0000:00:02.0/infiniband_verbs/uverbs1",
                     cls / "infiniband_verbs/uverbs1");
  fs::create_symlink("../../devices/virtual/infiniband_verbs/uverbs0",
                     cls / "infiniband_verbs/uverbs0");
  put(cls / "infiniband_verbs/abi_version", "6\n");
  fs::create_symlink("../../devices/pci0000:00/0000:00:02.0/infiniband_mad/umad0",
                     cls / "infiniband_mad/umad0");
  fs::create_symlink("../../devices/pci0000:00/0000:00:02.0/infiniband_mad/issm0",
                     cls / "infiniband_mad/issm0");
  put(cls / "infiniband_mad/abi_version", "5\n");
  for (const char* n : {"uverbs0", "uverbs1", "rdma_cm", "umad0", "issm0"})
    put(root / "dev/infiniband" / n, "");
}

RdmaDevices discover(const std::string& root) {
  auto d = discover_rdma(RdmaRoots{root, root});
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message());
  return d.ok() ? *d : RdmaDevices{};
}

TEST(RdmaDiscovery, EveryProviderFromTheClassDirs) {
  TempDir t("rdma");
  fabricate(t.path);
  RdmaDevices d = discover(t.path);
  ASSERT_EQ(d.hcas.size(), 2U);
  const Hca& m = d.hcas[0];
  EXPECT_EQ(m.name, "mlx5_0");
  EXPECT_EQ(m.index, 0);
  EXPECT_EQ(m.driver, "mlx5_core");
  EXPECT_EQ(m.node_guid, "0c42:a103:0016:054c");
  ASSERT_EQ(m.ports.size(), 1U);
  EXPECT_EQ(m.ports[0].state, "4: ACTIVE");
  EXPECT_EQ(m.ports[0].rate, "200 Gb/sec (4X HDR)");
  EXPECT_EQ(m.uverbs, "uverbs1");
  EXPECT_TRUE(m.has_node);
  EXPECT_EQ(m.node.host_path, t.path + "/dev/infiniband/uverbs1");
  EXPECT_EQ(m.mad, (std::vector<std::string>{"issm0", "umad0"}));
  const Hca& r = d.hcas[1];
  EXPECT_EQ(r.name, "rxe0");
  EXPECT_EQ(r.driver, "");
  EXPECT_EQ(r.uverbs, "uverbs0");
  EXPECT_EQ(r.ports[0].link_layer, "Ethernet");
  EXPECT_TRUE(d.has_rdma_cm);
}

TEST(RdmaDiscovery, NoHcasIsNotAnError) {
  TempDir t("rdma");
  RdmaDevices d = discover(t.path);
  EXPECT_FALSE(d.found());
}

TEST(RdmaSelect, Table) {
  TempDir t("rdma");
  fabricate(t.path);
  RdmaDevices d = discover(t.path);
  struct Case {
    std::string text;
    std::vector<std::string> want;
  } cases[] = {
      {"all", {"mlx5_0", "rxe0"}},
      {"none", {}},
      {"void", {}},
      {"", {}},
      {"1", {"rxe0"}},
      {"rxe0,0", {"rxe0", "mlx5_0"}},
      {"0,mlx5_0", {"mlx5_0"}},
  };
  for (const Case& c : cases) {
    auto got = select_hcas(d, parse_ib_request(c.text), "--ib " + c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.error().message();
    std::vector<std::string> names;
    for (const Hca* h : *got) names.push_back(h->name);
    EXPECT_EQ(names, c.want) << c.text;
  }
  auto bad = select_hcas(d, parse_ib_request("mlx5_9"), "--ib mlx5_9");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "select HCAs --ib mlx5_9: no HCA mlx5_9 (present: 0=mlx5_0, 1=rxe0)");
  auto two = select_hcas(d, parse_ib_request("2"), "MELLANOX_VISIBLE_DEVICES=2");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().message(),
            "select HCAs MELLANOX_VISIBLE_DEVICES=2: no HCA 2 (present: 0=mlx5_0, 1=rxe0)");
}

TEST(RdmaPlan, SelectedNodesRdmaCmNarrowedClassesNeverMad) {
  TempDir t("rdma");
  fabricate(t.path);
  RdmaDevices d = discover(t.path);
  auto sel = select_hcas(d, parse_ib_request("mlx5_0"), "--ib mlx5_0");
  ASSERT_TRUE(sel.ok());
  using K = DeviceEdit::Kind;
  std::vector<DeviceEdit> want = {
      {K::kBind, t.path + "/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1", false},
      {K::kBind, t.path + "/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", false},
      {K::kTmpfs, "", "/sys/class/infiniband", true, true, false},
      {K::kSymlink, "../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0",
       "/sys/class/infiniband/mlx5_0", true, false, false},
      {K::kTmpfs, "", "/sys/class/infiniband_verbs", true, true, false},
      {K::kBind, t.path + "/sys/class/infiniband_verbs/abi_version",
       "/sys/class/infiniband_verbs/abi_version", true, false, false},
      {K::kSymlink, "../../devices/pci0000:00/0000:00:02.0/infiniband_verbs/uverbs1",
       "/sys/class/infiniband_verbs/uverbs1", true, false, false},
      {K::kTmpfs, "", "/sys/class/infiniband_mad", true, true, false},
      {K::kBind, t.path + "/sys/class/infiniband_mad/abi_version",
       "/sys/class/infiniband_mad/abi_version", true, false, false},
  };
  EXPECT_EQ(plan_rdma(d, *sel, t.path + "/sys"), want);
  EXPECT_TRUE(plan_rdma(d, {}, t.path + "/sys").empty());
}

TEST(RdmaPlan, ContainerSysfsWithoutTheClassGetsAViewFromTheSysfsRoot) {
  TempDir t("rdma");
  fabricate(t.path);
  RdmaDevices d = discover(t.path);
  // The container's /sys: a kernel's without InfiniBand, two other classes.
  fs::create_directories(t.path + "/ctr-sys/class/net");
  fs::create_directories(t.path + "/ctr-sys/class/block");
  auto sel = select_hcas(d, parse_ib_request("mlx5_0"), "--ib mlx5_0");
  ASSERT_TRUE(sel.ok());
  using K = DeviceEdit::Kind;
  std::string pci = t.path + "/sys/devices/pci0000:00/0000:00:02.0";
  std::string ctr = t.path + "/ctr-sys/class";
  std::vector<DeviceEdit> want = {
      {K::kBind, t.path + "/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1", false},
      {K::kBind, t.path + "/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", false},
      {K::kTmpfs, "", "/sys/class", true, true, false},
      {K::kBind, ctr + "/block", "/sys/class/block", true, true, false},
      {K::kBind, ctr + "/net", "/sys/class/net", true, true, false},
      {K::kTmpfs, "", "/sys/class/infiniband", true, true, false},
      {K::kBind, pci + "/infiniband/mlx5_0", "/sys/class/infiniband/mlx5_0", true, true, false},
      {K::kTmpfs, "", "/sys/class/infiniband_verbs", true, true, false},
      {K::kBind, t.path + "/sys/class/infiniband_verbs/abi_version",
       "/sys/class/infiniband_verbs/abi_version", true, false, false},
      {K::kBind, pci + "/infiniband_verbs/uverbs1", "/sys/class/infiniband_verbs/uverbs1", true,
       true, false},
      {K::kTmpfs, "", "/sys/class/infiniband_mad", true, true, false},
      {K::kBind, t.path + "/sys/class/infiniband_mad/abi_version",
       "/sys/class/infiniband_mad/abi_version", true, false, false},
  };
  EXPECT_EQ(plan_rdma(d, *sel, t.path + "/ctr-sys"), want);
}

}  // namespace
}  // namespace berth

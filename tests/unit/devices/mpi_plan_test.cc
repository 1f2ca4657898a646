#include <gtest/gtest.h>

#include "devices/mpi.h"

namespace berth {
namespace {

using K = DeviceEdit::Kind;

MpiDeclaration mpich(MpiAbiRule rule) {
  MpiDeclaration d;
  d.type = "mpich";
  d.abi = rule;
  return d;
}

TEST(MpiPlan, OverBesideAndDependencies) {
  std::vector<HostLibrary> host = {
      {"/opt/mpi/lib/libmpich.so.12", "/opt/mpi/lib/libmpich.so.12.1.0", "libmpich.so.12"},
      {"/opt/mpi/lib/libmpichfort.so.12", "/opt/mpi/lib/libmpichfort.so.12.1.0",
       "libmpichfort.so.12"}};
  std::vector<HostLibrary> deps = {
      {"/usr/lib64/libfabric.so.1", "/usr/lib64/libfabric.so.1.18.0", "libfabric.so.1"}};
  std::vector<ImageLibrary> image = {
      {"libmpich.so.12", "/usr/lib/x86_64-linux-gnu/libmpich.so.12.0.4"},
      {"libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"}};
  auto plan = plan_mpi(mpich(MpiAbiRule::kFull), host, deps, image);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  std::vector<DeviceEdit> want = {
      {K::kBind, "/opt/mpi/lib/libmpich.so.12.1.0", "/usr/lib/x86_64-linux-gnu/libmpich.so.12.0.4",
       true},
      {K::kBind, "/opt/mpi/lib/libmpichfort.so.12.1.0", "/usr/lib/berth/mpi/libmpichfort.so.12.1.0",
       true},
      {K::kSymlink, "libmpichfort.so.12.1.0", "/usr/lib/berth/mpi/libmpichfort.so.12"},
      {K::kBind, "/usr/lib64/libfabric.so.1.18.0", "/usr/lib/berth/mpi/libfabric.so.1.18.0", true},
      {K::kSymlink, "libfabric.so.1.18.0", "/usr/lib/berth/mpi/libfabric.so.1"},
  };
  EXPECT_EQ(plan->edits, want);
  EXPECT_EQ(plan->library_dirs, std::vector<std::string>{kMpiLibDir});
  EXPECT_TRUE(plan->warnings.empty());
}

TEST(MpiPlan, OnlyOverNeedsNoLoaderDirectory) {
  std::vector<HostLibrary> host = {{"/h/libmpi.so.40", "/h/libmpi.so.40.30.2", "libmpi.so.40"}};
  std::vector<ImageLibrary> image = {{"libmpi.so.40", "/usr/lib/libmpi.so.40.30.0"}};
  auto plan = plan_mpi(mpich(MpiAbiRule::kStrict), host, {}, image);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->edits.size(), 1U);
  EXPECT_TRUE(plan->library_dirs.empty());
}

TEST(MpiPlan, NoImageMpiIsAnError) {
  std::vector<HostLibrary> host = {{"/h/libmpi.so.40", "/h/libmpi.so.40.30.2", "libmpi.so.40"}};
  auto plan = plan_mpi(mpich(MpiAbiRule::kMajor), host, {}, {{"libc.so.6", "/lib/libc.so.6"}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().message(),
            "inject MPI --mpi=mpich: the image has no MPI library to replace (none of libmpi.so "
            "in its ld.so.cache)");
}

}  // namespace
}  // namespace berth

// Device nodes under a device root (devices/device_node.h), for every vendor's discovery.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "core/fs.h"
#include "devices/device_node.h"

namespace berth {
namespace {

TEST(DeviceNode, UnderRootPrefixesAllButTheHostsRoot) {
  EXPECT_EQ(under_root("/", "/dev/kfd"), "/dev/kfd");
  EXPECT_EQ(under_root("/tmp/fake", "/dev/kfd"), "/tmp/fake/dev/kfd");
  EXPECT_EQ(under_root("/tmp/fake/", "/dev/kfd"), "/tmp/fake/dev/kfd");
}

TEST(DeviceNode, FindsRealNodesAndStandIns) {
  DeviceNode null;
  ASSERT_TRUE(find_node("/", "/dev/null", &null));
  EXPECT_EQ(null.path, "/dev/null");
  EXPECT_EQ(null.host_path, "/dev/null");
  EXPECT_TRUE(null.is_char);
  EXPECT_EQ(null.major, 1u);  // Linux's memory devices: /dev/null is 1:3
  EXPECT_EQ(null.minor, 3u);

  std::string root = ::testing::TempDir() + "berth-device-node-" + std::to_string(::getpid());
  ASSERT_TRUE(make_dirs(root + "/dev").ok());
  ASSERT_TRUE(write_file_atomic(root + "/dev/nvidia0", "").ok());
  DeviceNode stand_in;
  ASSERT_TRUE(find_node(root, "/dev/nvidia0", &stand_in));
  EXPECT_EQ(stand_in.path, "/dev/nvidia0");
  EXPECT_EQ(stand_in.host_path, root + "/dev/nvidia0");
  EXPECT_FALSE(stand_in.is_char);
  DeviceNode missing;
  EXPECT_FALSE(find_node(root, "/dev/kfd", &missing));
  EXPECT_EQ(missing.path, "");
  (void)remove_tree(root);  // best effort
}

}  // namespace
}  // namespace berth

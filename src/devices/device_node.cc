#include "devices/device_node.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "core/fs.h"

namespace berth {

std::string under_root(const std::string& root, std::string_view path) {
  return root == "/" ? std::string(path) : path_join(root, path);
}

bool find_node(const std::string& dev_root, const std::string& path, DeviceNode* node) {
  std::string host = under_root(dev_root, path);
  struct stat st;
  if (stat(host.c_str(), &st) != 0) return false;
  node->path = path;
  node->host_path = host;
  node->is_char = S_ISCHR(st.st_mode);
  if (node->is_char) {
    node->major = major(st.st_rdev);
    node->minor = minor(st.st_rdev);
  }
  return true;
}

}  // namespace berth

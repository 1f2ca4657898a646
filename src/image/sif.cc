#include "image/sif.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace berth {
namespace {

constexpr size_t kMagicAt = 32;
constexpr std::string_view kMagic("SIF_MAGIC\0", 10);
constexpr int32_t kDataPartition = 0x4004;
constexpr int32_t kFsSquash = 1;
constexpr int32_t kPartPrimSys = 2;
/// More descriptors than any SIF file holds (Apptainer makes 48 slots): a bound on what a
/// garbled header makes Berth read.
constexpr uint64_t kMaxDescriptors = 4096;

uint32_t le32(std::string_view b, size_t off) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(b[off + i])) << (8 * i);
  return v;
}
int64_t le64(std::string_view b, size_t off) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(b[off + i])) << (8 * i);
  return static_cast<int64_t>(v);
}

Error sif_error(const std::string& path, const std::string& what) {
  return make_error("read squashfs", path, "SIF file " + what, ErrorCode::kInvalidInput);
}

Result<std::string> read_at(int fd, uint64_t offset, size_t size, const std::string& path) {
  std::string buf(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, buf.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("read", path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  buf.resize(got);
  return buf;
}

std::string_view fs_type_name(int32_t t) {
  switch (t) {
    case 2:
      return "ext3";
    case 3:
      return "an archive";
    case 4:
      return "raw data";
    case 5:
      return "encrypted squashfs";
    case 6:
      return "gocryptfs squashfs";
    default:
      return "unknown";
  }
}

/// The value of one shell assignment's right-hand side when it is plain text (quoted or not,
/// or Apptainer's `"${K:-"V"}"`, a default the host's K overrides); nullopt when it computes.
std::optional<std::string> plain_value(std::string_view key, std::string_view v) {
  auto unquote = [](std::string_view s) -> std::optional<std::string_view> {
    if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
      return s.substr(1, s.size() - 2);
    if (s.find_first_of("\"' \t;#") != std::string_view::npos) return std::nullopt;
    return s;
  };
  bool single = !v.empty() && v.front() == '\'';
  auto inner = unquote(v);
  if (!inner) return std::nullopt;
  if (single) {
    if (inner->find('\'') != std::string_view::npos) return std::nullopt;
    return std::string(*inner);
  }
  std::string fallback = "${" + std::string(key) + ":-";
  if (inner->starts_with(fallback) && inner->ends_with("}")) {
    std::string_view d = inner->substr(fallback.size(), inner->size() - fallback.size() - 1);
    if (d.size() >= 2 && d.front() == '"' && d.back() == '"') d = d.substr(1, d.size() - 2);
    inner = d;
  }
  if (inner->find_first_of("$`\\\"") != std::string_view::npos) return std::nullopt;
  return std::string(*inner);
}

void parse_assignments(const std::string& text, std::vector<std::string>* keys,
                       std::vector<std::string>* values) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.remove_suffix(1);
    if (line.starts_with("export ")) line.remove_prefix(7);
    size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos) continue;
    std::string_view key = line.substr(0, eq);
    bool name = (key.front() < '0' || key.front() > '9');
    for (char c : key)
      name = name && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_');
    if (!name) continue;
    auto value = plain_value(key, line.substr(eq + 1));
    if (!value) continue;
    bool replaced = false;
    for (size_t i = 0; i < keys->size(); ++i)
      if ((*keys)[i] == key) {
        (*values)[i] = *value;
        replaced = true;
      }
    if (!replaced) {
      keys->emplace_back(key);
      values->push_back(*value);
    }
  }
}

}  // namespace

bool is_sif(std::string_view head) {
  return head.size() >= kMagicAt + kMagic.size() && head.substr(kMagicAt, kMagic.size()) == kMagic;
}

Result<SifTable> sif_descriptor_table(std::string_view header, uint64_t file_size,
                                      const std::string& path) {
  if (header.size() < kSifHeaderSize)
    return sif_error(path, "is truncated: " + std::to_string(file_size) +
                               " bytes, shorter than its global header");
  std::string_view version = header.substr(42, 3);
  if (version != std::string_view("01\0", 3))
    return make_error("read squashfs", path,
                      "SIF file version \"" + std::string(version.substr(0, version.find('\0'))) +
                          "\": only 01 is supported",
                      ErrorCode::kUnsupported);
  int64_t total = le64(header, 88), offset = le64(header, 96), size = le64(header, 104);
  if (total <= 0 || static_cast<uint64_t>(total) > kMaxDescriptors || offset < 0 || size < 0 ||
      static_cast<uint64_t>(size) < static_cast<uint64_t>(total) * kSifDescriptorSize ||
      static_cast<uint64_t>(offset) > file_size ||
      static_cast<uint64_t>(total) * kSifDescriptorSize > file_size - static_cast<uint64_t>(offset))
    return sif_error(path, "is corrupt or truncated: its descriptor table (" +
                               std::to_string(total) + " at offset " + std::to_string(offset) +
                               ") does not fit its " + std::to_string(file_size) + " bytes");
  return SifTable{static_cast<uint64_t>(offset), static_cast<uint64_t>(total)};
}

Result<SquashfsExtent> sif_system_partition(std::string_view descriptors, uint64_t count,
                                            uint64_t file_size, const std::string& path) {
  std::string other;
  for (uint64_t i = 0; i < count && (i + 1) * kSifDescriptorSize <= descriptors.size(); ++i) {
    std::string_view d = descriptors.substr(i * kSifDescriptorSize, kSifDescriptorSize);
    if (static_cast<int32_t>(le32(d, 0)) != kDataPartition || d[4] == 0) continue;
    int32_t fstype = static_cast<int32_t>(le32(d, 201));
    int32_t parttype = static_cast<int32_t>(le32(d, 205));
    if (parttype != kPartPrimSys) continue;
    if (fstype != kFsSquash) {
      other = std::string(fs_type_name(fstype));
      continue;
    }
    int64_t offset = le64(d, 17), size = le64(d, 25);
    if (offset < 0 || size <= 0 || static_cast<uint64_t>(offset) > file_size ||
        static_cast<uint64_t>(size) > file_size - static_cast<uint64_t>(offset))
      return sif_error(path, "is truncated: its squashfs system partition (" +
                                 std::to_string(size) + " bytes at offset " +
                                 std::to_string(offset) + ") ends past its " +
                                 std::to_string(file_size) + " bytes");
    return SquashfsExtent{static_cast<uint64_t>(offset), static_cast<uint64_t>(size), true};
  }
  if (!other.empty())
    return make_error("read squashfs", path,
                      "SIF file's system partition is " + other + ": only squashfs is supported",
                      ErrorCode::kUnsupported);
  return sif_error(path, "has no squashfs system partition");
}

Result<SquashfsExtent> locate_squashfs(int fd, uint64_t file_size, const std::string& path) {
  std::string head = BERTH_TRY(read_at(fd, 0, kSifHeaderSize, path));
  if (!is_sif(head)) return SquashfsExtent{0, file_size, false};
  SifTable table = BERTH_TRY(sif_descriptor_table(head, file_size, path));
  std::string descriptors =
      BERTH_TRY(read_at(fd, table.offset, table.count * kSifDescriptorSize, path));
  return sif_system_partition(descriptors, table.count, file_size, path);
}

Result<SquashfsSuperblock> read_squashfs_superblock(int fd, const SquashfsExtent& at,
                                                    const std::string& path) {
  std::string head = BERTH_TRY(read_at(fd, at.offset, kSquashfsSuperblockSize, path));
  auto sb = check_squashfs_superblock(head, at.size, path);
  if (!sb.ok() && at.sif) {
    Error e = std::move(sb).error();
    e.detail = "SIF file's squashfs partition: " + e.detail;
    return e;
  }
  return sb;
}

std::optional<nlohmann::json> sif_image_config(bool has_runscript,
                                               const std::optional<std::string>& docker_env,
                                               const std::optional<std::string>& environment) {
  if (!has_runscript && !docker_env && !environment) return std::nullopt;
  std::vector<std::string> keys, values;
  if (docker_env) parse_assignments(*docker_env, &keys, &values);
  if (environment) parse_assignments(*environment, &keys, &values);
  nlohmann::json config = {{"Entrypoint", {"/bin/sh", "-c", kSifEnvScript, "sif"}}};
  if (has_runscript) config["Cmd"] = {"/.singularity.d/runscript"};
  if (!keys.empty()) {
    nlohmann::json env = nlohmann::json::array();
    for (size_t i = 0; i < keys.size(); ++i) env.push_back(keys[i] + "=" + values[i]);
    config["Env"] = env;
  }
  return config;
}

}  // namespace berth

#include "gateway/accounting.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace berth::gateway {
namespace {

/// Seconds of [start, end) (end 0: running, up to now) inside [since, until).
int64_t seconds_in(const UsageRecord& r, int64_t since, int64_t until, int64_t now) {
  if (r.start <= 0) return 0;
  int64_t end = r.end > 0 ? r.end : now;
  int64_t from = std::max(r.start, since), to = std::min(end, until);
  return to > from ? to - from : 0;
}

const char* group_by_name(GroupBy by) {
  switch (by) {
    case GroupBy::kUser:
      return "user";
    case GroupBy::kGroup:
      return "group";
    case GroupBy::kGpuModel:
      return "gpu_model";
  }
  return "user";
}

std::string hours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", h);
  return buf;
}

/// `j[key]` as a string; "" when missing or null (sacct writes null for a TRES without a name
/// and for a user slurmdbd has no association of).
std::string text_or_empty(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
}

/// `j[key]` as a whole number; 0 when missing or null (the count of the energy TRES).
int64_t number_or_zero(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? 0 : it->get<int64_t>();
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::optional<GroupBy> parse_group_by(std::string_view text) {
  if (text == "user") return GroupBy::kUser;
  if (text == "group") return GroupBy::kGroup;
  if (text == "gpu_model") return GroupBy::kGpuModel;
  return std::nullopt;
}

std::vector<UsageRow> aggregate_usage(const std::vector<UsageRecord>& records, int64_t since,
                                      int64_t until, int64_t now, GroupBy by) {
  std::map<std::string, UsageRow> rows;
  for (const UsageRecord& r : records) {
    int64_t s = seconds_in(r, since, until, now);
    if (s == 0) continue;
    const std::string& key = by == GroupBy::kUser    ? r.user
                             : by == GroupBy::kGroup ? r.group
                                                     : r.gpu_model;
    double gpus = r.gpus + r.gpu_share;
    if (by == GroupBy::kGpuModel && gpus == 0) continue;  // CPU jobs have no GPU model
    UsageRow& row = rows[key];
    row.key = key;
    row.gpu_hours += gpus * static_cast<double>(s) / 3600;
    row.cpu_hours += r.cpus * static_cast<double>(s) / 3600;
    ++row.jobs;
  }
  std::vector<UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

double gpu_hours_of_group(const std::vector<UsageRecord>& records, const std::string& group,
                          int64_t since, int64_t until, int64_t now) {
  double h = 0;
  for (const UsageRecord& r : records)
    if (r.group == group)
      h += (r.gpus + r.gpu_share) * static_cast<double>(seconds_in(r, since, until, now)) / 3600;
  return h;
}

nlohmann::json usage_json(const std::vector<UsageRow>& rows, GroupBy by, int64_t since,
                          int64_t until) {
  nlohmann::json list = nlohmann::json::array();
  for (const UsageRow& r : rows)
    list.push_back({{group_by_name(by), r.key},
                    {"gpu_hours", std::stod(hours(r.gpu_hours))},
                    {"cpu_hours", std::stod(hours(r.cpu_hours))},
                    {"jobs", r.jobs}});
  return {{"group_by", group_by_name(by)}, {"since", since}, {"until", until}, {"rows", list}};
}

std::string usage_csv(const std::vector<UsageRow>& rows, GroupBy by) {
  std::string out = std::string(group_by_name(by)) + ",gpu_hours,cpu_hours,jobs\n";
  for (const UsageRow& r : rows)
    out += csv_field(r.key) + "," + hours(r.gpu_hours) + "," + hours(r.cpu_hours) + "," +
           std::to_string(r.jobs) + "\n";
  return out;
}

Result<std::vector<UsageRecord>> usage_from_sacct_json(const std::string& text,
                                                       const ShareUnits& share) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("jobs") || !doc["jobs"].is_array())
    return make_error("read accounting", "sacct --json",
                      "not a sacct JSON document (no \"jobs\" list)");
  std::vector<UsageRecord> out;
  try {
    for (const auto& j : doc["jobs"]) {
      UsageRecord r;
      r.job_id = std::to_string(number_or_zero(j, "job_id"));
      r.user = text_or_empty(j, "user");
      r.group = text_or_empty(j, "account");
      const auto& time = j.value("time", nlohmann::json::object());
      r.start = number_or_zero(time, "start");
      r.end = number_or_zero(time, "end");
      if (r.start <= 0) continue;
      int typed = 0;
      const auto& tres = j.value("tres", nlohmann::json::object());
      for (const auto& t : tres.value("allocated", nlohmann::json::array())) {
        std::string type = text_or_empty(t, "type"), name = text_or_empty(t, "name");
        int count = static_cast<int>(number_or_zero(t, "count"));
        if (type == "cpu")
          r.cpus = count;
        else if (type == "gres" && name == "gpu")
          r.gpus = count;
        else if (type == "gres" && name.starts_with("gpu:")) {
          r.gpu_model = name.substr(4);
          typed += count;
        } else if (type == "gres" && !share.gres.empty() && share.units_per_gpu > 0 &&
                   (name == share.gres || name.starts_with(share.gres + ":"))) {
          // Untyped and typed ("shard:a100") entries name the same units: the larger count.
          r.gpu_share = std::max(
              r.gpu_share, static_cast<double>(count) / static_cast<double>(share.units_per_gpu));
          if (name.size() > share.gres.size()) r.gpu_model = name.substr(share.gres.size() + 1);
        }
      }
      if (r.gpus == 0) r.gpus = typed;  // only typed entries recorded
      out.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error("read accounting", "sacct --json",
                      std::string("unexpected field type: ") + e.what());
  }
  return out;
}

}  // namespace berth::gateway

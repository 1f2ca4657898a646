// berthd's read side (gateway/output.h, systems.h, slurm_v0038.h's GPU and node shapes): GRES
// counting, a job's times and GPUs, nodes and partitions into a system's state, the tail of
// an output file, the output folder's default ACL, the batch script's redirections, and the
// database's new columns on an old database.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

#include "gateway/config.h"
#include "gateway/jobs.h"
#include "gateway/jobs_db.h"
#include "gateway/output.h"
#include "gateway/slurm_api.h"
#include "gateway/slurm_v0038.h"
#include "gateway/systems.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

const SlurmApi& v0038() {
  return *slurm_api("v0.0.38");
}

using json = nlohmann::json;

TEST(GatewayRead, ClusterAndOutputDirConfiguration) {
  std::string base =
      "database = \"/j.db\"\n[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n"
      "[slurm]\nrest_url = \"http://h:1\"\njwt_key = \"/k\"\n";
  auto c = parse_gateway_config(base, "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->slurm.cluster, "slurm");
  EXPECT_EQ(c->slurm.output_dir, "");
  c = parse_gateway_config(base + "cluster = \"hpc1\"\noutput_dir = \"/spool/out\"\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->slurm.cluster, "hpc1");
  EXPECT_EQ(c->slurm.output_dir, "/spool/out");
  EXPECT_EQ(parse_gateway_config(base + "output_dir = \"spool\"\n", "f").error().message(),
            "read config f: line 8: \"output_dir\" is not an absolute path");
  EXPECT_EQ(parse_gateway_config(base + "cluster = \"\"\n", "f").error().message(),
            "read config f: line 8: \"cluster\" is empty");
}

TEST(GatewayRead, GresGpus) {
  EXPECT_EQ(gres_gpus("gpu:fake:2"), 2);
  EXPECT_EQ(gres_gpus("gpu:fake:1(IDX:0)"), 1);
  EXPECT_EQ(gres_gpus("gpu:a100:2(S:0-1),gpu:t4:1,nic:1"), 3);
  EXPECT_EQ(gres_gpus("gpu:2(IDX:0,2)"), 2);  // a comma inside parentheses
  EXPECT_EQ(gres_gpus("gpu"), 1);
  EXPECT_EQ(gres_gpus("gpu:fake:0(IDX:N/A)"), 0);
  EXPECT_EQ(gres_gpus("(null)"), 0);
  EXPECT_EQ(gres_gpus(""), 0);
  EXPECT_EQ(gres_gpus("gpus:4,mps:100"), 0);
  EXPECT_EQ(gres_gpus("gpu:a100"), 0);
  EXPECT_EQ(tres_per_gpus("gres:gpu:2"), 2);
  EXPECT_EQ(tres_per_gpus("gres/gpu:a100:2"), 2);
  EXPECT_EQ(tres_per_gpus("cpu:4,gres/gpu:1"), 1);
  EXPECT_EQ(tres_per_gpus("gres/shard:2"), 0);
  EXPECT_EQ(tres_per_gpus(""), 0);
}

TEST(GatewayRead, JobTimesAndGpus) {
  auto pending = parse_job(v0038(), R"({"jobs": [{"job_state": "PENDING", "submit_time": 10,
      "start_time": 99, "end_time": 199, "gres_detail": []}]})",
                           "u");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->submit_time, 10);
  EXPECT_EQ(pending->start_time, 0);  // Slurm's estimate, not a fact
  EXPECT_EQ(pending->end_time, 0);
  auto running = parse_job(v0038(), R"j({"jobs": [{"job_state": "RUNNING", "start_time": 20,
      "end_time": 3620, "gres_detail": ["gpu:a100:2(IDX:0-1)", "gpu:a100:1(IDX:3)"],
      "tres_alloc_str": "cpu=1,mem=100M,node=2"}]})j",
                           "u");
  EXPECT_EQ(running->start_time, 20);
  EXPECT_EQ(running->end_time, 0);  // the time limit, not an end
  EXPECT_EQ(running->gpus, 3);
  EXPECT_EQ(running->gres_detail,
            (std::vector<std::string>{"gpu:a100:2(IDX:0-1)", "gpu:a100:1(IDX:3)"}));
  auto ended = parse_job(v0038(), R"({"jobs": [{"job_state": "COMPLETED", "exit_code": 0,
      "start_time": 20, "end_time": 80, "gres_detail": [],
      "tres_alloc_str": "cpu=1,gres/gpu:a100=4,gres/gpu=4,node=1"}]})",
                         "u");
  EXPECT_EQ(ended->end_time, 80);
  EXPECT_EQ(ended->gpus, 4);
  EXPECT_TRUE(ended->gres_detail.empty());
}

TEST(GatewayRead, NodesPartitionsAndPing) {
  auto nodes = parse_nodes(v0038(), R"j({"errors": [], "nodes": [
      {"name": "n1", "state": "mixed", "state_flags": [], "gres": "gpu:fake:2",
       "gres_used": "gpu:fake:1(IDX:0)", "partitions": ["debug"], "cpus": 16, "alloc_cpus": 1},
      {"name": "n2", "state": "idle", "state_flags": ["DRAIN"], "gres": "gpu:fake:2",
       "gres_used": "gpu:fake:0(IDX:N/A)", "partitions": ["debug", "gpu"], "cpus": 16},
      {"name": "n3", "state": "down", "gres": "", "cpus": 8}]})j",
                           "u");
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].state, "mixed");
  EXPECT_EQ((*nodes)[0].gpus_used, 1);
  EXPECT_EQ((*nodes)[1].state, "unavailable");
  EXPECT_EQ((*nodes)[2].state, "unavailable");
  auto parts = parse_partitions(v0038(), R"({"partitions": [{"name": "debug", "state": "UP",
      "flags": ["default"], "total_nodes": 3, "total_cpus": 40}]})",
                                "u");
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].is_default, true);
  EXPECT_EQ(*parse_ping(v0038(), R"({"pings": [{"hostname": "c", "ping": "UP"}]})", "u"), true);
  EXPECT_EQ(*parse_ping(v0038(), R"({"pings": [{"hostname": "c", "ping": "DOWN"}]})", "u"), false);
  EXPECT_FALSE(parse_nodes(v0038(), R"({"errors": [{"description": "Access denied"}]})", "u").ok());
  EXPECT_EQ(parse_nodes(v0038(), "[]", "u").error().message(),
            "parse u: slurmrestd's answer is not an object");

  json sys = system_json("hpc", "", true, *nodes, *parts, "v0.0.38");
  EXPECT_EQ(sys["slurm_api"], "v0.0.38");
  EXPECT_EQ(sys["state"], "degraded");
  EXPECT_EQ(sys["reason"], "2 of 3 nodes unavailable");
  EXPECT_EQ(sys["gpus"], json::parse(R"({"total": 4, "allocated": 1})"));
  EXPECT_EQ(sys["cpus"], json::parse(R"({"total": 40, "allocated": 1})"));
  EXPECT_EQ(sys["partitions"][0], json::parse(R"({"name": "debug", "state": "UP",
      "default": true, "nodes": 3, "cpus": 40, "gpus": 4})"));
  std::vector<SlurmNode> one_up = {(*nodes)[0]};
  EXPECT_EQ(system_json("hpc", "", true, one_up, *parts, "v0.0.38")["state"], "up");
  std::vector<SlurmPartition> down_part = *parts;
  down_part[0].state = "DOWN";
  EXPECT_EQ(system_json("hpc", "", true, one_up, down_part, "v0.0.38")["reason"],
            "a partition is not UP");
  EXPECT_EQ(system_json("hpc", "", false, one_up, *parts, "v0.0.38")["reason"],
            "slurmctld does not answer");
  json gone = system_json("hpc", "GET http://x/ping: slurmrestd: Connection", false, {}, {}, "");
  EXPECT_EQ(gone["slurm_api"], nullptr);  // not chosen yet
  EXPECT_EQ(gone["state"], "down");
  EXPECT_EQ(gone["reason"], "GET http://x/ping: slurmrestd: Connection");
  std::vector<SlurmNode> none_up = {(*nodes)[1]};
  EXPECT_EQ(system_json("hpc", "", true, none_up, *parts, "v0.0.38")["reason"],
            "no node is available");
}

TEST(GatewayRead, TailOfAFile) {
  TempDir dir("tail");
  uid_t me = ::geteuid();
  bool cut = false;
  std::string f = dir.write("out", "1\n2\n3\n4\n5\n");
  EXPECT_EQ(*read_tail(f, me, 2, 1 << 20, &cut), "4\n5\n");
  EXPECT_TRUE(cut);
  EXPECT_EQ(*read_tail(f, me, 5, 1 << 20, &cut), "1\n2\n3\n4\n5\n");
  EXPECT_FALSE(cut);
  EXPECT_EQ(*read_tail(f, me, 100, 1 << 20, &cut), "1\n2\n3\n4\n5\n");
  EXPECT_FALSE(cut);
  EXPECT_EQ(*read_tail(f, me, 100, 4, &cut), "4\n5\n");  // the byte cap
  EXPECT_TRUE(cut);
  std::string open_line = dir.write("partial", "a\nb\nc");  // no line end yet
  EXPECT_EQ(*read_tail(open_line, me, 1, 1 << 20, &cut), "c");
  EXPECT_EQ(*read_tail(open_line, me, 2, 1 << 20, &cut), "b\nc");
  // Longer than a block of the backwards read.
  std::string big(40000, 'x');
  std::string b = dir.write("big", "first\n" + big + "\nlast\n");
  EXPECT_EQ(*read_tail(b, me, 2, 1 << 20, &cut), big + "\nlast\n");
  EXPECT_TRUE(cut);
  EXPECT_EQ(*read_tail(dir / "missing", me, 2, 1 << 20, &cut), "");
  auto other = read_tail(f, me + 1, 2, 1 << 20, &cut);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().message(),
            "read " + f + ": the file is not the job owner's (uid " + std::to_string(me) + ")");
  ASSERT_EQ(::symlink(f.c_str(), (dir / "link").c_str()), 0);
  auto link = read_tail(dir / "link", me, 2, 1 << 20, &cut);
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().sys_errno, ELOOP);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(read_tail(dir / "fifo", me, 2, 1 << 20, &cut).error().message(),
            "read " + (dir / "fifo") + ": not a regular file");
}

/// The binary default ACL "u::rw,u:UID:r,g::G,m::M,o::O".
std::string acl(uid_t uid, uint16_t group, uint16_t mask, uint16_t other) {
  std::string out;
  auto put = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (auto [tag, perm, id] : {std::tuple<uint16_t, uint16_t, uint32_t>{1, 6, ~0u},
                               {2, 4, uid},
                               {4, group, ~0u},
                               {0x10, mask, ~0u},
                               {0x20, other, ~0u}}) {
    put(tag, 2);
    put(perm, 2);
    put(id, 4);
  }
  return out;
}

TEST(GatewayRead, OutputFolderDefaultAcl) {
  EXPECT_TRUE(default_acl_reads(acl(1000, 0, 4, 0), 1000));
  EXPECT_FALSE(default_acl_reads(acl(1000, 0, 4, 0), 1001));  // another account named
  EXPECT_FALSE(default_acl_reads(acl(1000, 4, 4, 0), 1000));  // the group could read
  EXPECT_FALSE(default_acl_reads(acl(1000, 0, 4, 4), 1000));  // everyone could
  EXPECT_FALSE(default_acl_reads(acl(1000, 0, 2, 0), 1000));  // the mask takes read away
  EXPECT_FALSE(default_acl_reads(acl(1000, 0, 4, 0).substr(0, 21), 1000));
  EXPECT_FALSE(default_acl_reads("", 1000));

  TempDir dir("outdir");
  std::string out = dir / "output";
  ASSERT_EQ(::mkdir(out.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(out.c_str(), 01733), 0);
  uid_t me = ::geteuid();
  auto no_acl = check_output_dir(out, me);
  ASSERT_FALSE(no_acl.ok());
  EXPECT_EQ(no_acl.error().message(),
            "read config " + out +
                ": [slurm] output_dir has no default ACL that lets berthd, and no one else, "
                "read the jobs' files");
  EXPECT_EQ(check_output_dir(out, me + 1).error().detail,
            "[slurm] output_dir is owned by uid " + std::to_string(me) + ", not berthd's (" +
                std::to_string(me + 1) + ")");
  ASSERT_EQ(::chmod(out.c_str(), 0733), 0);
  EXPECT_EQ(check_output_dir(out, me).error().detail,
            "[slurm] output_dir is not sticky and writable by all (mode 1733)");
  ASSERT_EQ(::chmod(out.c_str(), 01777), 0);
  EXPECT_EQ(check_output_dir(out, me).error().detail,
            "[slurm] output_dir is readable by all: jobs' file names would show");
  ASSERT_EQ(::chmod(out.c_str(), 01733), 0);
  std::string value = acl(me, 0, 4, 0);
  if (::setxattr(out.c_str(), "system.posix_acl_default", value.data(), value.size(), 0) != 0)
    GTEST_SKIP() << "no POSIX ACLs on " << out << ": " << std::strerror(errno);
  auto good = check_output_dir(out, me);
  EXPECT_TRUE(good.ok()) << good.error().message();
}

TEST(GatewayRead, OutputGoesToTheOutputDir) {
  JobRequest r = *parse_job_request(json::parse(R"({"image": "alpine:3", "command": ["true"]})"));
  SlurmConfig cfg;
  SlurmJobSpec plain = slurm_spec(r, 7, "c", cfg, "berthd-7-ab");
  EXPECT_EQ(plain.script, "#!/bin/sh\nexec srun --container-image='alpine:3' -- 'true'\n");
  EXPECT_EQ(plain.standard_output, "");
  cfg.output_dir = "/spool/out";
  SlurmJobSpec s = slurm_spec(r, 7, "c", cfg, "berthd-7-ab");
  EXPECT_EQ(s.script,
            "#!/bin/sh\nexec srun --container-image='alpine:3' -- 'true' "
            ">>'/spool/out/berthd-7-ab.out' 2>>'/spool/out/berthd-7-ab.err'\n");
  EXPECT_EQ(s.standard_output, "/dev/null");
  // With idle-GPU reclaim on, a GPU job samples its GPUs beside its output first; a job
  // without GPUs does not.
  cfg.reclaim = true;
  EXPECT_EQ(slurm_spec(r, 7, "c", cfg, "berthd-7-ab").script, s.script);
  r.gpus = 1;
  std::string gpu_script = slurm_spec(r, 7, "c", cfg, "berthd-7-ab").script;
  EXPECT_TRUE(gpu_script.starts_with("#!/bin/sh\n( sel=;")) << gpu_script;
  EXPECT_NE(gpu_script.find("while kill -0 $$ 2>/dev/null; do 'berth' gpu stats $sel --json"),
            std::string::npos)
      << gpu_script;
  EXPECT_NE(gpu_script.find(">>'/spool/out/berthd-7-ab.gpu'"), std::string::npos) << gpu_script;
  r.gpus = 0;
  cfg.reclaim = false;
  json body = submit_body_v0038(s);
  EXPECT_EQ(body["job"]["standard_output"], "/dev/null");
  EXPECT_EQ(body["job"]["standard_error"], "/dev/null");
  // The names: the job id in clear, a keyed hash that only the secret gives.
  std::string stem = output_stem("secret", "inst", 7);
  EXPECT_EQ(stem.size(), std::string("berthd-7-").size() + 32);
  EXPECT_TRUE(stem.starts_with("berthd-7-"));
  EXPECT_EQ(stem, output_stem("secret", "inst", 7));
  EXPECT_NE(stem, output_stem("secret2", "inst", 7));
  EXPECT_NE(stem, output_stem("secret", "inst", 8));
}

TEST(GatewayRead, DatabaseKeepsTimesAndGpusAndUpgradesAnOldOne) {
  TempDir dir("jobsdb-read");
  std::string path = dir / "jobs.db";
  {
    // A database of the first schema, without the later columns.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, R"(
      CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT NULL,
        issuer TEXT NOT NULL, subject TEXT NOT NULL, idempotency_key TEXT, request TEXT NOT NULL,
        state TEXT NOT NULL, slurm_job_id INTEGER NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT '', exit_code INTEGER, nodes TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        UNIQUE (owner, idempotency_key));
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO meta VALUES ('instance', 'feedfacefeedface');
      INSERT INTO jobs (owner, issuer, subject, request, state, created_at, updated_at)
        VALUES ('alice', 'i', 's', '{}', 'PENDING', 1, 1);)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  std::string secret;
  {
    auto db = JobsDb::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message();
    EXPECT_EQ((*db)->instance(), "feedfacefeedface");
    secret = (*db)->secret();
    EXPECT_EQ(secret.size(), 32u);
    auto old = (*db)->get(1);
    ASSERT_TRUE(old.ok() && *old);
    EXPECT_EQ((*old)->gpus, 0);
    EXPECT_TRUE((*old)->gres_detail.empty());
    JobRecord j = **old;
    j.state = JobState::kRunning;
    j.start_time = 50;
    j.gpus = 2;
    j.gres_detail = {"gpu:a100:2(IDX:0-1)"};
    j.updated_at = 51;
    ASSERT_TRUE((*db)->record(j).ok());
  }
  auto db = JobsDb::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ((*db)->secret(), secret);  // made once
  JobRecord j = **(*db)->get(1);
  EXPECT_EQ(job_state_name(j.state), "RUNNING");
  EXPECT_EQ(j.start_time, 50);
  EXPECT_EQ(j.gpus, 2);
  EXPECT_EQ(j.gres_detail, std::vector<std::string>{"gpu:a100:2(IDX:0-1)"});
  json shown = job_json(j);
  EXPECT_EQ(shown["gpus_allocated"], 2);
  EXPECT_EQ(shown["start_time"], 50);
  EXPECT_TRUE(shown["end_time"].is_null());
}

}  // namespace
}  // namespace berth::gateway

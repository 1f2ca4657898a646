// berthd's configuration file (gateway/config.h): its keys, and the unsafe or malformed ones
// refused with the file and line named.
#include "gateway/config.h"

#include <gtest/gtest.h>

namespace berth::gateway {
namespace {

TEST(GatewayConfig, ReadsEveryKey) {
  auto c = parse_gateway_config(R"(
listen = "0.0.0.0:8443"
tls_cert = "/etc/berthd/cert.pem"
tls_key = "/etc/berthd/key.pem"
leeway_s = 30
jwks_min_refresh_s = 10
admin_groups = ["/hpc/admins"]
database = "/var/lib/berthd/jobs.db"

[[issuers]]
issuer = "https://iam.example.org/"
audience = "berth"
required_scope = "compute.create"
username_claim = "preferred_username"

[[issuers]]
issuer = "http://127.0.0.1:9000/realms/test"
audience = "berth-test"

[[users]]
issuer = "http://127.0.0.1:9000/realms/test"
sub = "1234"
user = "alice"

[slurm]
rest_url = "http://127.0.0.1:6820"
jwt_key = "/etc/berthd/slurm_jwt.key"
token_lifespan_s = 30
partition = "gpu"
workdir = "/scratch"
environment = { PATH = "/usr/bin:/bin" }
)",
                                "/etc/berthd.conf");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->listen_host, "0.0.0.0");
  EXPECT_EQ(c->listen_port, 8443);
  EXPECT_TRUE(c->tls());
  EXPECT_EQ(c->leeway_s, 30);
  EXPECT_EQ(c->jwks_min_refresh_s, 10);
  EXPECT_EQ(c->admin_groups, std::vector<std::string>{"/hpc/admins"});
  EXPECT_EQ(c->database, "/var/lib/berthd/jobs.db");
  ASSERT_EQ(c->issuers.size(), 2u);
  EXPECT_EQ(c->issuers[0].required_scope, "compute.create");
  EXPECT_EQ(c->issuers[0].username_claim, "preferred_username");
  EXPECT_EQ(c->issuers[1].audience, "berth-test");
  ASSERT_EQ(c->users.size(), 1u);
  EXPECT_EQ(c->users[0].user, "alice");
  EXPECT_EQ(c->find_issuer("https://iam.example.org/"), &c->issuers[0]);
  EXPECT_TRUE(c->jobs());
  EXPECT_EQ(c->slurm.rest_url, "http://127.0.0.1:6820");
  EXPECT_EQ(c->slurm.jwt_key, "/etc/berthd/slurm_jwt.key");
  EXPECT_EQ(c->slurm.token_lifespan_s, 30);
  EXPECT_EQ(c->slurm.partition, "gpu");
  EXPECT_EQ(c->slurm.workdir, "/scratch");
  EXPECT_EQ(c->slurm.environment.at("PATH"), "/usr/bin:/bin");
  EXPECT_EQ(c->slurm.api_version, "auto");  // unless [slurm] api_version says
  EXPECT_EQ(c->find_issuer("https://iam.example.org"), nullptr);
}

TEST(GatewayConfig, SlurmApiVersionIsAutoOrOneBerthdSpeaks) {
  const std::string conf =
      "database = \"/j.db\"\n[[issuers]]\nissuer = \"https://a/\"\n"
      "audience = \"b\"\n[slurm]\nrest_url = \"http://h:1\"\n"
      "jwt_key = \"/k\"\n";
  for (const char* v : {"auto", "v0.0.38", "v0.0.41"}) {
    auto c = parse_gateway_config(conf + "api_version = \"" + v + "\"\n", "f");
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->slurm.api_version, v);
  }
  auto c = parse_gateway_config(conf + "api_version = \"v0.0.40\"\n", "f");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "read config f: line 8: \"api_version\" is not \"auto\" or a version berthd speaks "
            "(v0.0.41, v0.0.38): \"v0.0.40\"");
}

TEST(GatewayConfig, DefaultsListenOnLoopback) {
  auto c = parse_gateway_config("[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->listen_host, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 8080);
  EXPECT_FALSE(c->tls());
}

TEST(GatewayConfig, GpuModelsAreTheModelsAJobMayAskFor) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss, "f");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->slurm.gpu_models.empty());
  c = parse_gateway_config(iss + R"([gpu_models.a100]
vendor = "NVIDIA"
memory_mb = 40960
[gpu_models.t4]
model = "Tesla T4"
)",
                           "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->slurm.gpu_models, (std::vector<std::string>{"a100", "t4"}));
  EXPECT_EQ(c->publish.gpu_models.at("a100").memory_mb, 40960);
  // The compute capability is measured, never typed (gateway/gpu_facts.h).
  auto typed =
      parse_gateway_config(iss + "[gpu_models.a100]\ncompute_capability = [\"8.0\"]\n", "f");
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.error().message().find("\"compute_capability\" is measured by NVML on the"),
            std::string::npos)
      << typed.error().message();
  EXPECT_EQ(c->publish.max_gpus_per_job, -1);  // no [limits]: none published
  // GLUE's MaxSlotsPerJob is everyone's max_gpus_per_job.
  c = parse_gateway_config(iss + "[limits]\nmax_gpus_per_job = 4\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->publish.max_gpus_per_job, 4);
}

TEST(GatewayConfig, PartitionsAJobMayNameAreTheListAndTheConfiguredOne) {
  const std::string conf =
      "database = \"/j.db\"\n[[issuers]]\nissuer = \"https://a/\"\n"
      "audience = \"b\"\n[slurm]\nrest_url = \"http://h:1\"\n"
      "jwt_key = \"/k\"\n";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"", {}},  // Slurm's default partition, and none a job may name
      {"partition = \"gpu\"\n", {"gpu"}},
      {"partition = \"gpu\"\npartitions = [\"long\", \"debug\"]\n", {"gpu", "long", "debug"}},
      {"partition = \"gpu\"\npartitions = [\"long\", \"gpu\"]\n", {"long", "gpu"}},
      {"partitions = [\"long\"]\n", {"long"}},
  };
  for (const auto& [text, partitions] : cases) {
    auto c = parse_gateway_config(conf + text, "f");
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->slurm.partitions, partitions) << text;
  }
  const std::pair<std::string, const char*> bad[] = {
      {"partitions = \"gpu\"\n", "read config f: line 8: \"partitions\" is not a list of strings"},
      {"partitions = [\"gpu\", \"a b\"]\n",
       "read config f: line 8: \"partitions\" names \"a b\", not a partition name (letters, "
       "digits, '_', '.', '-')"},
      {"partitions = [\"\"]\n",
       "read config f: line 8: \"partitions\" names \"\", not a partition name (letters, digits, "
       "'_', '.', '-')"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(conf + text, "f");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayConfig, ShareKeysDefaultsAndErrors) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss, "f");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->slurm.share.enabled);  // no [share]: no sharing
  c = parse_gateway_config(iss + R"([share]
gres = "shard"
units_per_gpu = 8
pipe_dir = "/run/nvidia-mps"
log_dir = "/var/log/mps"
)",
                           "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->slurm.share.enabled);
  EXPECT_EQ(c->slurm.share.gres, "shard");
  EXPECT_EQ(c->slurm.share.units_per_gpu, 8);
  EXPECT_EQ(c->slurm.share.pipe_dir, "/run/nvidia-mps");
  EXPECT_EQ(c->slurm.share.log_dir, "/var/log/mps");
  // MPS: 100 per GPU unless said otherwise, CUDA's default directories.
  c = parse_gateway_config(iss + "[share]\ngres = \"mps\"\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->slurm.share.units_per_gpu, 100);
  EXPECT_EQ(c->slurm.share.pipe_dir, "/tmp/nvidia-mps");
  EXPECT_EQ(c->slurm.share.log_dir, "/var/log/nvidia-mps");
  c = parse_gateway_config(iss + "[share]\nenabled = false\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(c->slurm.share.enabled);
  const std::pair<std::string, const char*> bad[] = {
      {"[share]\n", "read config f: [share] has no \"units_per_gpu\""},
      {"[share]\ngres = \"gpu\"\n", "read config f: line 5: \"gres\" is not \"shard\" or \"mps\""},
      {"[share]\nunits_per_gpu = 0\n",
       "read config f: line 5: \"units_per_gpu\" is not a whole number from 1 to 100000"},
      {"[share]\nunits_per_gpu = 4\npipe_dir = \"mps\"\n",
       "read config f: line 6: \"pipe_dir\" is not an absolute path without ':', ',' or a newline"},
      {"[share]\nunits_per_gpu = 4\nlog_dir = \"/a:/b\"\n",
       "read config f: line 6: \"log_dir\" is not an absolute path without ':', ',' or a newline"},
      {"[share]\nshards = 4\n", "read config f: line 5: \"shards\" is not a key of [share]"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(iss + text, "f");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayConfig, BrokerSitesAndScoreWeights) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss, "f");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->broker.enabled);  // no [broker]: a gateway only
  const std::string exchanging =
      iss + "exchange_client_id = \"broker\"\nexchange_client_secret_file = \"/etc/s\"\n";
  c = parse_gateway_config(exchanging + R"([broker]
[broker.score]
start_now = 5
reliability = 0.5

[[broker.sites]]
name = "hpc-a"
url = "https://berthd.a.example.org/"
audience = "berthd-a"
token = "exchange"
weight = 2
weights = { "/vo/ml" = 3 }
groups = ["/vo/ml", "/vo/bio"]
info_ttl_s = 60

[[broker.sites]]
name = "k8s"
kind = "kubernetes"
url = "https://k8s.example.org:6443"
resources = "/etc/berthd/k8s-glue.json"
gpu_jobs = true
namespace = "ml"
runtime_class = "nvidia"

[[broker.sites]]
name = "paper"
kind = "static"
resources = "/etc/berthd/paper.json"
shares = true
)",
                           "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  const BrokerConfig& b = c->broker;
  EXPECT_TRUE(b.enabled);
  EXPECT_EQ(b.score_start_now, 5);
  EXPECT_EQ(b.score_reliability, 0.5);
  EXPECT_EQ(b.score_wait, 2);  // the default
  ASSERT_EQ(b.sites.size(), 3u);
  const BrokerSiteConfig& a = b.sites[0];
  EXPECT_EQ(a.kind, "berthd");
  EXPECT_EQ(a.url, "https://berthd.a.example.org");  // the trailing slash dropped
  EXPECT_EQ(a.audience, "berthd-a");
  EXPECT_EQ(a.token, "exchange");
  EXPECT_EQ(a.weight, 2);
  EXPECT_EQ(a.weights.at("/vo/ml"), 3);
  EXPECT_EQ(a.groups, (std::vector<std::string>{"/vo/ml", "/vo/bio"}));
  EXPECT_EQ(a.info_ttl_s, 60);
  EXPECT_EQ(b.sites[1].resources, "/etc/berthd/k8s-glue.json");
  EXPECT_EQ(b.sites[1].info_ttl_s, 300);
  EXPECT_EQ(b.sites[1].manifest.k8s_namespace, "ml");
  EXPECT_EQ(b.sites[1].manifest.runtime_class, "nvidia");
  EXPECT_EQ(b.sites[0].manifest.k8s_namespace, "default");
  EXPECT_TRUE(b.sites[2].shares);
  EXPECT_EQ(b.find_site("k8s"), &b.sites[1]);
  EXPECT_EQ(b.find_site("nope"), nullptr);

  const std::pair<std::string, const char*> bad[] = {
      {"[broker]\n", "read config f: [broker] has no \"sites\""},
      {"[[broker.sites]]\nurl = \"https://x\"\n",
       "read config f: [[broker.sites]] has no \"name\""},
      {"[[broker.sites]]\nname = \"a\"\n", "read config f: [[broker.sites]] a has no \"url\""},
      {"[[broker.sites]]\nname = \"A b\"\n",
       "read config f: line 5: \"name\" is not lower-case letters, digits, '-', '_' and '.'"},
      {"[[broker.sites]]\nname = \"a\"\nkind = \"mesos\"\n",
       "read config f: line 6: \"kind\" is not berthd, kubernetes, marathon, chronos, openstack "
       "or static"},
      {"[[broker.sites]]\nname = \"a\"\nkind = \"marathon\"\nurl = \"http://m:8080\"\n",
       "read config f: [[broker.sites]] a (kind marathon) has no \"resources\""},
      {"[[broker.sites]]\nname = \"a\"\nurl = \"ftp://x\"\n",
       "read config f: line 6: \"url\" is not an http:// or https:// URL"},
      {"[[broker.sites]]\nname = \"a\"\nurl = \"https://x\"\ntoken = \"keep\"\n",
       "read config f: line 7: \"token\" is not \"forward\" or \"exchange\""},
      {"[[broker.sites]]\nname = \"a\"\nurl = \"https://x\"\nweight = -1\n",
       "read config f: line 7: \"weight\" is not a number from 0 to 1000"},
      {"[[broker.sites]]\nname = \"a\"\nurl = \"https://x\"\n[[broker.sites]]\nname = \"a\"\n"
       "url = \"https://y\"\n",
       "read config f: line 4: \"sites\" names site \"a\" twice"},
      {"[broker.score]\nluck = 1\n",
       "read config f: line 5: \"luck\" is not a factor of [broker.score]"},
      {"[broker]\nfederate = true\n",
       "read config f: line 5: \"federate\" is not a key of [broker]"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(iss + text, "f");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayConfig, TheBrokersExchangeClientHasItsSecretInAFile) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss + R"(exchange_client_id = "berth-broker"
exchange_client_secret_file = "/etc/berthd/exchange-a.secret"
)",
                                "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->issuers[0].exchange_client_id, "berth-broker");
  EXPECT_EQ(c->issuers[0].exchange_client_secret_file, "/etc/berthd/exchange-a.secret");
  EXPECT_EQ(parse_gateway_config(iss, "f")->issuers[0].exchange_client_id, "");  // none

  const std::string site = "[[broker.sites]]\nname = \"a\"\nurl = \"https://x\"\n";
  const std::pair<std::string, const char*> bad[] = {
      {iss + "exchange_client_secret = \"hunter2\"\n",
       "read config f: line 4: \"exchange_client_secret\" is not a key of [[issuers]]: put the "
       "secret in a file only berthd reads, named by exchange_client_secret_file"},
      {iss + "exchange_client_id = \"x\"\n",
       "read config f: [[issuers]] https://a/ has no \"exchange_client_secret_file\""},
      {iss + "exchange_client_secret_file = \"/s\"\n",
       "read config f: [[issuers]] https://a/ has no \"exchange_client_id\""},
      {iss + "exchange_client_id = \"x\"\nexchange_client_secret_file = \"/s\"\n" + site +
           "token = \"exchange\"\n",
       "read config f: [[broker.sites]] a has token = \"exchange\" and no audience: the audience "
       "to ask for"},
      {iss + site + "token = \"exchange\"\naudience = \"a\"\n",
       "read config f: [[broker.sites]] a has token = \"exchange\", and no [[issuers]] has an "
       "exchange_client_id: the broker could exchange no caller's token"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(text, "f");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayConfig, ResourcesUrlAndInfiniband) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(
      iss + "[resources]\nurl = \"https://gw.example.org/\"\ninfiniband = true\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->publish.url, "https://gw.example.org");
  EXPECT_TRUE(c->publish.infiniband);
  auto e = parse_gateway_config(iss + "[resources]\nurl = \"gw.example.org\"\n", "f");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(),
            "read config f: line 5: \"url\" is not an http:// or https:// URL");
}

TEST(GatewayConfig, AccountsAndConnectionsKeys) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss, "f");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->accounts.uid_min, 1000);
  EXPECT_EQ(c->accounts.uid_max, 60000);
  EXPECT_FALSE(c->accounts.allow_own_account);
  EXPECT_EQ(c->connections.request_timeout_s, 30);
  EXPECT_EQ(c->connections.idle_timeout_s, 5);
  EXPECT_EQ(c->connections.max_per_address, 32);
  EXPECT_EQ(c->connections.max_queued, 256);
  c = parse_gateway_config(iss + R"([accounts]
uid_min = 500
uid_max = 70000
allow_own_account = true

[connections]
request_timeout_s = 10
idle_timeout_s = 2
max_per_address = 4
max_queued = 8
)",
                           "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->accounts.uid_min, 500);
  EXPECT_EQ(c->accounts.uid_max, 70000);
  EXPECT_TRUE(c->accounts.allow_own_account);
  EXPECT_EQ(c->connections.request_timeout_s, 10);
  EXPECT_EQ(c->connections.idle_timeout_s, 2);
  EXPECT_EQ(c->connections.max_per_address, 4);
  EXPECT_EQ(c->connections.max_queued, 8);
  const std::pair<std::string, const char*> bad[] = {
      {"[accounts]\nuid_min = 0\n",
       "read config f: line 5: \"uid_min\" is not a whole number from 1 to 4294967294"},
      {"[accounts]\nuid_min = 2000\nuid_max = 1000\n",
       "read config f: line 4: \"accounts\" has uid_min above uid_max: no account could run jobs"},
      {"[connections]\nrequest_timeout_s = 0\n",
       "read config f: line 5: \"request_timeout_s\" is not a whole number from 1 to 3600"},
      {"[connections]\nmax_clients = 1\n",
       "read config f: line 5: \"max_clients\" is not a key of [connections]"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(iss + text, "f");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayConfig, RefusesWhatIsUnsafeOrMalformed) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"", "read config f: no [[issuers]]: berthd trusts no tokens"},
      {"listen = \"0.0.0.0:8080\"\n" + iss,
       "read config f: plain HTTP on 0.0.0.0, which is not loopback: configure tls_cert and "
       "tls_key, or set plain_http_anywhere = true"},
      {"listen = \"8080\"\n" + iss, "read config f: line 1: \"listen\" is not HOST:PORT: \"8080\""},
      {"listen = \"h:70000\"\n" + iss,
       "read config f: line 1: \"listen\" is not HOST:PORT with a port of 0 to 65535: \"h:70000\""},
      {"tls_cert = \"/c.pem\"\n" + iss,
       "read config f: tls_cert and tls_key go together: give both or neither"},
      {"[[issuers]]\nissuer = \"https://a/\"\n",
       "read config f: [[issuers]] https://a/ has no \"audience\""},
      {"[[issuers]]\nissuer = \"http://idp.example.org/\"\naudience = \"b\"\n",
       "read config f: line 2: \"issuer\" is not an https:// URL (plain http:// only on "
       "loopback): \"http://idp.example.org/\""},
      {iss + iss, "read config f: issuer \"https://a/\" is listed twice"},
      {iss + "[[users]]\nissuer = \"https://z/\"\nsub = \"1\"\nuser = \"u\"\n",
       "read config f: [[users]] names issuer \"https://z/\", which is not in [[issuers]]"},
      {iss + "[[users]]\nissuer = \"https://a/\"\nsub = \"1\"\n",
       "read config f: [[users]] has no \"user\""},
      {"colour = \"blue\"\n" + iss,
       "read config f: line 1: \"colour\" is not a key of berthd's configuration"},
      {"leeway_s = -1\n" + iss,
       "read config f: line 1: \"leeway_s\" is not a whole number of seconds from 0 to 86400"},
      {"issuers = 3\n",
       "read config f: line 1: \"issuers\" is not an array of tables ([[issuers]])"},
      {"database = \"/j.db\"\n" + iss,
       "read config f: database and [slurm] go together: the job endpoints need both"},
      {iss + "[slurm]\nrest_url = \"http://h:1\"\n", "read config f: [slurm] has no \"jwt_key\""},
      {iss + "[slurm]\nrest_url = \"h:1\"\njwt_key = \"/k\"\n",
       "read config f: line 5: \"rest_url\" is not an http:// or https:// URL"},
      {iss + "[slurm]\nenvironment = { A = 1 }\n", "read config f: line 5: \"A\" is not a string"},
      {"listen = \n",
       "read config f: line 1, column 10: Error while parsing key-value pair: expected value, saw "
       "'\\n'"},
  };
  for (const Case& t : cases) {
    auto c = parse_gateway_config(t.text, "f");
    ASSERT_FALSE(c.ok()) << t.text;
    EXPECT_EQ(c.error().message(), t.message) << t.text;
  }
  // Plain HTTP elsewhere than loopback when the configuration says so.
  EXPECT_TRUE(
      parse_gateway_config("listen = \"0.0.0.0:80\"\nplain_http_anywhere = true\n" + iss, "f")
          .ok());
  EXPECT_TRUE(parse_gateway_config("listen = \"[::1]:80\"\n" + iss, "f").ok());
}

}  // namespace
}  // namespace berth::gateway

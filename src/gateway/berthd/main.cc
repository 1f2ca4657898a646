// berthd, Berth's REST job gateway (docs/gateway.md): `berthd --config FILE`.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/build_info.h"
#include "core/fs.h"
#include "gateway/audit.h"
#include "gateway/auth.h"
#include "gateway/broker.h"
#include "gateway/config.h"
#include "gateway/jobs.h"
#include "gateway/output.h"
#include "gateway/server.h"
#include "gateway/slurm_api.h"

namespace {

constexpr const char* kUsage =
    "Usage: berthd --config FILE\n"
    "Berth's REST job gateway: OIDC bearer tokens, jobs through Slurm (docs/gateway.md).\n";

int fail(const berth::Error& e) {
  std::fprintf(stderr, "berthd: %s\n", e.message().c_str());
  if (!e.hint.empty()) std::fprintf(stderr, "hint: %s\n", e.hint.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg.starts_with("--config=")) {
      config_path = arg.substr(9);
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      // The git commit and the Slurm release the plugin beside it was built for
      // (core/build_info.h): what an admin compares across nodes.
      std::string slurm = berth::build_info::kSlurmRelease;
      std::printf("berthd %s (git %s, Slurm %s)\n", BERTH_VERSION, berth::build_info::kGitCommit,
                  slurm.empty() ? "none" : slurm.c_str());
      return 0;
    } else {
      std::fprintf(stderr, "berthd: unknown argument \"%s\"\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "berthd: --config FILE is required\n%s", kUsage);
    return 2;
  }
  auto config = berth::gateway::read_gateway_config(config_path);
  if (!config.ok()) return fail(config.error());

  // SIGTERM and SIGINT end the server cleanly: blocked here, before any thread starts, and
  // taken by one thread with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client that goes away mid-answer must not kill the server.
  signal(SIGPIPE, SIG_IGN);

  // The accounts no token maps to besides root and the uids outside [accounts]: berthd's own
  // and Slurm's SlurmUser, from the slurm.conf Slurm's own commands would read.
  berth::gateway::ServiceAccounts services;
  services.own_uid = geteuid();
  std::string slurm_conf = "/etc/slurm/slurm.conf";
  if (const char* env = std::getenv("SLURM_CONF"); env != nullptr && *env != '\0') slurm_conf = env;
  if (auto it = config->slurm.environment.find("SLURM_CONF"); it != config->slurm.environment.end())
    slurm_conf = it->second;
  if (auto user = berth::gateway::read_slurm_user(slurm_conf); user.ok())
    services.slurm_user = *user;
  else
    std::fprintf(stderr, "berthd: SlurmUser taken as root: %s\n", user.error().message().c_str());
  auto lookup = berth::gateway::system_user_lookup();
  if (auto ids = lookup(services.slurm_user)) services.slurm_uid = ids->first;
  berth::gateway::Authenticator auth(*config, berth::gateway::http_fetcher(), lookup, services);
  std::unique_ptr<berth::gateway::JobService> jobs;
  if (config->jobs()) {
    auto db = berth::gateway::JobsDb::open(config->database);
    if (!db.ok()) return fail(db.error());
    auto key = berth::read_file(config->slurm.jwt_key);
    if (!key.ok()) return fail(key.error());
    if (!config->slurm.output_dir.empty()) {
      auto checked = berth::gateway::check_output_dir(config->slurm.output_dir, geteuid());
      if (!checked.ok()) return fail(checked.error());
    }
    // The slurmrestd API version: the configured one, or ("auto", nullptr) the one chosen at
    // the first call; either is said in one line.
    const berth::gateway::SlurmApi* api = berth::gateway::slurm_api(config->slurm.api_version);
    jobs = std::make_unique<berth::gateway::JobService>(
        std::move(*db),
        berth::gateway::SlurmRest(config->slurm.rest_url, *key, config->slurm.token_lifespan_s,
                                  api),
        config->slurm, config->limits, config->quotas, config->accounting);
    if (api != nullptr)
      std::fprintf(stderr, "berthd: slurmrestd API %s ([slurm] api_version)\n",
                   std::string(api->version).c_str());
    else
      jobs->slurm().set_api_observer(
          [url = config->slurm.rest_url](const berth::gateway::SlurmApi& chosen,
                                         const std::vector<std::string>& offered) {
            std::fprintf(stderr, "berthd: slurmrestd %s offers %s: speaking %s\n", url.c_str(),
                         berth::gateway::join_versions(offered).c_str(),
                         std::string(chosen.version).c_str());
          });
  }
  // Jobs a crash left ACCEPTED are settled before the first request: found in Slurm by their
  // comment, or submitted now.
  if (jobs) {
    auto r = jobs->reconcile(std::time(nullptr), 0);
    std::fprintf(stderr,
                 "berthd: reconciled: %d found in Slurm, %d submitted, %d left for later, %d "
                 "refreshed\n",
                 r.found, r.resubmitted, r.failed, r.refreshed);
  }
  std::unique_ptr<berth::gateway::AuditLog> audit;
  if (!config->audit_log.empty()) {
    auto opened = berth::gateway::AuditLog::open(config->audit_log);
    if (!opened.ok()) return fail(opened.error());
    audit = std::move(*opened);
  }
  // The broker mode ([broker]): its file-described sites are read now, so that berthd does
  // not start on a description it cannot read.
  std::unique_ptr<berth::gateway::BrokerService> broker;
  // RFC 8693 exchange for the sites of token = "exchange": each secret file is read now, so
  // that berthd does not start on one it cannot read (or one that all may read).
  std::unique_ptr<berth::gateway::TokenExchanger> exchanger;
  if (config->broker.enabled) {
    for (const berth::gateway::IssuerConfig& i : config->issuers)
      if (!i.exchange_client_id.empty())
        if (auto secret = berth::gateway::read_exchange_secret(i); !secret.ok())
          return fail(secret.error());
    exchanger = std::make_unique<berth::gateway::TokenExchanger>(config->issuers,
                                                                 berth::gateway::http_fetcher());
    broker = std::make_unique<berth::gateway::BrokerService>(config->broker, exchanger.get());
    if (auto loaded = broker->load(); !loaded.ok()) return fail(loaded.error());
    std::fprintf(stderr, "berthd: broker over %zu site(s)\n", config->broker.sites.size());
  }
  // A broker with a database of its own and no Slurm of its own: the job endpoints are the
  // broker's (gateway/broker_jobs.h).
  std::unique_ptr<berth::gateway::JobsDb> broker_db;
  std::unique_ptr<berth::gateway::BrokerJobs> brokered;
  if (broker && !jobs && !config->database.empty()) {
    auto db = berth::gateway::JobsDb::open(config->database);
    if (!db.ok()) return fail(db.error());
    broker_db = std::move(*db);
    brokered = std::make_unique<berth::gateway::BrokerJobs>(*broker_db, *broker, config->broker);
    std::fprintf(stderr, "berthd: broker jobs in %s\n", config->database.c_str());
  }
  berth::gateway::Server server(*config, auth, jobs.get(), BERTH_VERSION, audit.get(), broker.get(),
                                brokered.get());
  auto port = server.bind();
  if (!port.ok()) return fail(port.error());
  std::fprintf(stderr, "berthd: listening on %s://%s:%d\n", config->tls() ? "https" : "http",
               config->listen_host.c_str(), *port);
  std::fflush(stderr);

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  waiter.detach();
  // Then periodically, on a thread of its own; ACCEPTED jobs younger than kInFlightS may still
  // be in a request's hands (slurmrestd's timeouts are 30 s).
  constexpr int64_t kInFlightS = 120;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  // A gateway's database settled with its Slurm; a broker's jobs (it has no Slurm of its own)
  // with their sites, as the tokens its callers last came with allow (gateway/broker_jobs.h):
  // failover and races settle while no one asks.
  std::function<void()> round;
  if (jobs)
    round = [&] { jobs->reconcile(std::time(nullptr), kInFlightS); };
  else if (brokered)
    round = [&] { brokered->reconcile(std::time(nullptr)); };
  std::thread reconciler;
  if (round && config->reconcile_interval_s > 0)
    reconciler = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(config->reconcile_interval_s),
                          [&] { return stopping; })) {
        lock.unlock();  // the cap thread's wait, and the stop, need the lock meanwhile
        round();
        lock.lock();
      }
    });
  // Cloud jobs cut at their time limit (gateway/caps.h): every second, so that a cut lands
  // within a second or two of it, not Slurm's minute.
  std::thread capper;
  if (jobs)
    capper = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(berth::gateway::kCapCheckIntervalS),
                          [&] { return stopping; })) {
        lock.unlock();
        int cut = jobs->cut_at_caps(std::time(nullptr));
        if (cut > 0) std::fprintf(stderr, "berthd: cut %d cloud job(s) at their time limit\n", cut);
        lock.lock();
      }
    });
  berth::Status served = server.serve();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  if (reconciler.joinable()) reconciler.join();
  if (capper.joinable()) capper.join();
  if (!served.ok()) return fail(served.error());
  return 0;
}

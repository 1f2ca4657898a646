#include "image/registry.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "core/base64.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "fake_http_server.h"
#include "image/http.h"
#include "test_util.h"

namespace berth {
namespace {

using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

TEST(Registry, InsecureHostsAndBaseUrl) {
  RegistryOptions o;
  o.insecure = {"myreg:5000", "lab.example"};
  EXPECT_TRUE(registry_is_insecure("127.0.0.1:5000", o));
  EXPECT_TRUE(registry_is_insecure("localhost", o));
  EXPECT_TRUE(registry_is_insecure("LOCALHOST:443", o));
  EXPECT_TRUE(registry_is_insecure("[::1]:5000", o));
  EXPECT_TRUE(registry_is_insecure("::1", o));
  EXPECT_TRUE(registry_is_insecure("myreg:5000", o));
  EXPECT_TRUE(registry_is_insecure("lab.example:8443", o));  // a bare host allows any port
  EXPECT_FALSE(registry_is_insecure("myreg:5001", o));
  EXPECT_FALSE(registry_is_insecure("ghcr.io", o));
  EXPECT_FALSE(registry_is_insecure("127.0.0.2:5000", o));

  EXPECT_EQ(RegistryClient("docker.io", o, {}).base_url(), "https://registry-1.docker.io");
  EXPECT_EQ(RegistryClient("ghcr.io", o, {}).base_url(), "https://ghcr.io");
  EXPECT_EQ(RegistryClient("localhost:5000", o, {}).base_url(), "http://localhost:5000");
  EXPECT_EQ(RegistryClient("myreg:5000", o, {}).base_url(), "http://myreg:5000");
}

FakeResponse json(int status, std::string body) {
  return {status, {{"Content-Type", "application/json"}}, std::move(body)};
}

const char* kManifest =
    R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"})";

/// A registry that wants Bearer tokens from its own /token endpoint. The token
/// service accepts user:pass (or anonymous, when `allow_anonymous`) and hands out
/// "tok-N"; the registry accepts only the newest token.
struct BearerFixture {
  std::atomic<int> issued{0};
  bool allow_anonymous = true;
  std::string blob = std::string(100000, 'x') + "end";
  FakeHttpServer server{[this](const FakeRequest& r) { return handle(r); }};

  FakeResponse handle(const FakeRequest& r) {
    if (r.target.starts_with("/token")) {
      std::string auth = r.header("authorization");
      if (auth.empty() ? !allow_anonymous : auth != "Basic " + base64_encode("user:pass")) {
        return json(401, R"({"details":"incorrect username or password"})");
      }
      return json(200, R"({"token":"tok-)" + std::to_string(++issued) + R"(","expires_in":300})");
    }
    if (r.header("authorization") != "Bearer tok-" + std::to_string(issued.load())) {
      FakeResponse f =
          json(401, R"({"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]})");
      f.headers.push_back(
          {"WWW-Authenticate", R"(Bearer realm="http://)" + server.host() +
                                   R"(/token",service="fake",scope="repository:a/b:pull")"});
      return f;
    }
    if (r.target == "/v2/") return json(200, "{}");
    if (r.target == "/v2/a/b/manifests/v1") {
      return {200, {{"Docker-Content-Digest", sha256_digest(kManifest)}}, kManifest};
    }
    if (r.target.starts_with("/v2/a/b/blobs/")) return {200, {}, blob};
    return json(
        404,
        R"({"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]})");
  }
};

TEST(RegistryFake, BearerTokenFetchedOnceAndReusedAcrossThreads) {
  BearerFixture f;
  RegistryClient c(f.server.host(), {}, Credentials{"user", "pass", ""});
  auto m = c.get_manifest("a/b", "v1");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->digest, sha256_digest(kManifest));
  EXPECT_EQ(m->media_type, "application/vnd.oci.image.manifest.v1+json");

  std::vector<std::thread> ts;
  ts.reserve(4);
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&] {
      std::string got;
      bool restarted = true;
      Status st = c.get_blob(
          "a/b", "sha256:" + std::string(64, 'a'), 0,
          [&](const char* d, size_t n) -> Status {
            got.append(d, n);
            return {};
          },
          &restarted);
      if (st.ok() && got == f.blob && !restarted) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(f.issued.load(), 1);  // one token, shared by the later requests

  auto reqs = f.server.requests();
  ASSERT_GE(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].target, "/v2/a/b/manifests/v1");
  EXPECT_EQ(reqs[0].header("authorization"), "");
  EXPECT_NE(reqs[0].header("accept").find("application/vnd.oci.image.index.v1+json"),
            std::string::npos);
  EXPECT_EQ(reqs[1].target, "/token?service=fake&scope=repository%3Aa%2Fb%3Apull");
  EXPECT_EQ(reqs[1].header("authorization"), "Basic " + base64_encode("user:pass"));
  EXPECT_EQ(reqs[2].header("authorization"), "Bearer tok-1");
  EXPECT_EQ(reqs.size(), 3u + 4u);
}

TEST(RegistryFake, RefusedCachedTokenIsRefreshedOnce) {
  BearerFixture f;
  RegistryClient c(f.server.host(), {}, std::nullopt);
  ASSERT_TRUE(c.get_manifest("a/b", "v1").ok());
  ++f.issued;  // the registry now wants tok-3: the cached tok-1 is refused
  auto m = c.get_manifest("a/b", "v1");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(f.issued.load(), 3);
}

TEST(RegistryFake, WrongCredentialsAndAnonymousDenied) {
  BearerFixture f;
  f.allow_anonymous = false;
  RegistryClient bad(f.server.host(), {}, Credentials{"user", "wrong", ""});
  Status st = bad.check_login();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "GET http://" + f.server.host() + "/token: registry " +
                                      f.server.host() + " rejected the credentials (HTTP 401)");
  EXPECT_EQ(st.error().hint,
            "check the credentials given to 'berth login " + f.server.host() + "'");

  RegistryClient anon(f.server.host(), {}, std::nullopt);
  auto m = anon.get_manifest("a/b", "v1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().http_status, 401);
  EXPECT_EQ(m.error().hint, "run 'berth login " + f.server.host() + "'");

  RegistryClient good(f.server.host(), {}, Credentials{"user", "pass", ""});
  EXPECT_TRUE(good.check_login().ok());
}

TEST(RegistryFake, RedirectToStorageDropsAuthorization) {
  std::string blob = "layer-bytes";
  FakeHttpServer storage([&](const FakeRequest&) { return FakeResponse{200, {}, blob}; });
  FakeHttpServer reg([&](const FakeRequest& r) -> FakeResponse {
    if (r.header("authorization") != "Basic " + base64_encode("u:p")) {
      return {401, {{"WWW-Authenticate", R"(Basic realm="r")"}}, ""};
    }
    return {307, {{"Location", "http://" + storage.host() + "/store/x?sig=1"}}, ""};
  });
  RegistryClient c(reg.host(), {}, Credentials{"u", "p", ""});
  std::string got;
  Status st = c.get_blob(
      "a", "sha256:" + std::string(64, 'b'), 0,
      [&](const char* d, size_t n) -> Status {
        got.append(d, n);
        return {};
      },
      nullptr);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(got, blob);
  auto sreqs = storage.requests();
  ASSERT_EQ(sreqs.size(), 1u);
  EXPECT_EQ(sreqs[0].target, "/store/x?sig=1");
  EXPECT_EQ(sreqs[0].header("authorization"), "");  // credentials stay with the registry
  EXPECT_EQ(reg.requests().size(), 2u);
}

TEST(RegistryFake, RangeIgnoredMeansRestartedAndSinkErrorsPassThrough) {
  std::string blob = "0123456789";
  FakeHttpServer reg([&](const FakeRequest&) { return FakeResponse{200, {}, blob}; });
  RegistryClient c(reg.host(), {}, std::nullopt);
  bool restarted = false;
  bool restarted_seen_first = false;
  std::string got;
  Status st = c.get_blob(
      "a", "sha256:" + std::string(64, 'c'), 4,
      [&](const char* d, size_t n) -> Status {
        if (got.empty()) restarted_seen_first = restarted;
        got.append(d, n);
        return {};
      },
      &restarted);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_TRUE(restarted);
  EXPECT_TRUE(restarted_seen_first);  // known before the first byte arrived
  EXPECT_EQ(got, blob);
  EXPECT_EQ(reg.requests().at(0).header("range"), "bytes=4-");

  Status failed = c.get_blob(
      "a", "sha256:" + std::string(64, 'c'), 0,
      [&](const char*, size_t) -> Status {
        return make_error("write", "/store/partial", "disk full");
      },
      nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message(), "write /store/partial: disk full");
}

TEST(RegistryFake, ManifestDigestMismatch) {
  FakeHttpServer reg([&](const FakeRequest&) {
    return FakeResponse{
        200, {{"Docker-Content-Digest", "sha256:" + std::string(64, '0')}}, kManifest};
  });
  RegistryClient c(reg.host(), {}, std::nullopt);
  auto m = c.get_manifest("a", "v1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message(),
            "GET http://" + reg.host() + "/v2/a/manifests/v1: manifest digest " +
                sha256_digest(kManifest) +
                " does not match Docker-Content-Digest sha256:" + std::string(64, '0'));
  std::string want = "sha256:" + std::string(64, '1');
  auto by_digest = c.get_manifest("a", want);
  ASSERT_FALSE(by_digest.ok());
  EXPECT_NE(by_digest.error().message().find("does not match"), std::string::npos);
}

TEST(RegistryFake, NetworkErrorNamesUrl) {
  int port;
  {
    FakeHttpServer gone([](const FakeRequest&) { return FakeResponse{}; });
    port = gone.port();
  }
  RegistryClient c("127.0.0.1:" + std::to_string(port), {}, std::nullopt);
  auto m = c.get_manifest("a", "v1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().op.word(), "GET");
  EXPECT_EQ(m.error().subject, "http://127.0.0.1:" + std::to_string(port) + "/v2/a/manifests/v1");
  EXPECT_NE(m.error().detail.find("onnect"), std::string::npos) << m.error().detail;
}

// ---- RegistryLive: a real Debian docker-registry on 127.0.0.1 ----

constexpr const char* kRegistryBin = "/usr/bin/docker-registry";

int free_port() {
  // Bound to port 0 for a moment to learn a free port; the registry binds it next.
  FakeHttpServer probe([](const FakeRequest&) { return FakeResponse{}; });
  return probe.port();
}

/// docker-registry serving from a temporary folder, optionally behind htpasswd
/// (user "user", password "pass"). Stopped and removed on destruction.
class LiveRegistry {
 public:
  bool start(bool htpasswd, std::string* why) {
    dir_ = tmp_.path;
    port_ = free_port();
    std::string cfg =
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: " + dir_ +
        "/data\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port_) + "\n";
    if (htpasswd) {
      FILE* p = ::popen("htpasswd -Bbn user pass 2>/dev/null", "r");
      std::string line;
      char buf[256];
      while (p && ::fgets(buf, sizeof buf, p)) line += buf;
      if (!p || ::pclose(p) != 0 || line.empty())
        return *why = "htpasswd (apache2-utils) not available", false;
      if (!write_file_atomic(dir_ + "/htpasswd", line).ok())
        return *why = "cannot write htpasswd", false;
      cfg += "auth:\n  htpasswd:\n    realm: berth-test\n    path: " + dir_ + "/htpasswd\n";
    }
    if (!write_file_atomic(dir_ + "/cfg.yml", cfg).ok()) return *why = "cannot write config", false;
    const std::string log_path = dir_ + "/registry.log", cfg_path = dir_ + "/cfg.yml";
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls here: no stdio, whose buffers hold the parent's output.
      int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
      }
      ::execl(kRegistryBin, kRegistryBin, "serve", cfg_path.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 150; ++i) {  // up to 15 s
      HttpRequest r;
      r.url = url("/v2/");
      auto resp = http_perform(r);
      if (resp.ok() && (resp->status == 200 || resp->status == 401)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *why = "docker-registry did not answer on port " + std::to_string(port_);
    return false;
  }
  ~LiveRegistry() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url(const std::string& path) const { return "http://" + host() + path; }

  /// Uploads a blob (POST then PUT) and returns its digest; "" on failure.
  std::string push_blob(const std::string& repo, const std::string& data) {
    std::string digest = sha256_digest(data);
    HttpRequest post = with_auth(url("/v2/" + repo + "/blobs/uploads/"));
    post.method = "POST";
    auto started = http_perform(post);
    if (!started.ok() || started->status != 202) return "";
    std::string loc = started->header("location");
    if (loc.starts_with("/")) loc = url(loc);
    HttpRequest put = with_auth(loc + (loc.find('?') == std::string::npos ? "?" : "&") +
                                "digest=" + url_escape(digest));
    put.method = "PUT";
    put.headers.push_back("Content-Type: application/octet-stream");
    put.post_body = data;
    auto done = http_perform(put);
    return done.ok() && done->status == 201 ? digest : "";
  }
  bool push_manifest(const std::string& repo, const std::string& tag, const std::string& body) {
    HttpRequest put = with_auth(url("/v2/" + repo + "/manifests/" + tag));
    put.method = "PUT";
    put.headers.push_back("Content-Type: application/vnd.oci.image.manifest.v1+json");
    put.post_body = body;
    auto done = http_perform(put);
    return done.ok() && done->status == 201;
  }
  std::string auth_header;  ///< "Authorization: ..." for pushes, or ""

 private:
  HttpRequest with_auth(std::string u) {
    HttpRequest r;
    r.url = std::move(u);
    if (!auth_header.empty()) r.headers.push_back(auth_header);
    return r;
  }
  TempDir tmp_{"registry"};
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

class RegistryLive : public ::testing::Test {
 protected:
  void start(bool htpasswd) {
    if (::access(kRegistryBin, X_OK) != 0) GTEST_SKIP() << kRegistryBin << " is not installed";
    std::string why;
    if (!reg_.start(htpasswd, &why)) GTEST_SKIP() << why;
    if (htpasswd) reg_.auth_header = "Authorization: Basic " + base64_encode("user:pass");
    std::mt19937 rng(42);
    layer_.resize(300000);
    for (auto& ch : layer_) ch = static_cast<char>(rng());
    std::string config =
        R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
    std::string cd = reg_.push_blob("test/app", config);
    std::string ld = reg_.push_blob("test/app", layer_);
    ASSERT_FALSE(cd.empty());
    ASSERT_FALSE(ld.empty());
    layer_digest_ = ld;
    manifest_ =
        R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)"
        R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" +
        cd + R"(","size":)" + std::to_string(config.size()) +
        R"(},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")" +
        ld + R"(","size":)" + std::to_string(layer_.size()) + "}]}";
    ASSERT_TRUE(reg_.push_manifest("test/app", "v1", manifest_));
  }

  Status fetch(RegistryClient& c, uint64_t offset, std::string* got, bool* restarted) {
    return c.get_blob(
        "test/app", layer_digest_, offset,
        [&](const char* d, size_t n) -> Status {
          got->append(d, n);
          return {};
        },
        restarted);
  }

  LiveRegistry reg_;
  std::string layer_, layer_digest_, manifest_;
};

TEST_F(RegistryLive, PlainManifestsBlobsRangeAndErrors) {
  start(false);
  if (IsSkipped() || HasFatalFailure()) return;
  RegistryClient c(reg_.host(), {}, std::nullopt);
  EXPECT_EQ(c.base_url(), reg_.url(""));
  ASSERT_TRUE(c.check_login().ok());

  auto m = c.get_manifest("test/app", "v1");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->body, manifest_);
  EXPECT_EQ(m->digest, sha256_digest(manifest_));
  EXPECT_EQ(m->media_type, "application/vnd.oci.image.manifest.v1+json");
  auto by_digest = c.get_manifest("test/app", m->digest);
  ASSERT_TRUE(by_digest.ok()) << by_digest.error().message();
  EXPECT_EQ(by_digest->body, manifest_);

  std::string got;
  bool restarted = true;
  ASSERT_TRUE(fetch(c, 0, &got, &restarted).ok());
  EXPECT_FALSE(restarted);
  EXPECT_EQ(got, layer_);

  got.clear();
  restarted = true;
  Status st = fetch(c, 123456, &got, &restarted);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_FALSE(restarted);  // 206: the rest only
  EXPECT_EQ(got, layer_.substr(123456));

  auto missing = c.get_manifest("nope", "latest");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(),
            "GET " + reg_.url("/v2/nope/manifests/latest") + ": manifest unknown (HTTP 404)");
  std::string absent = "sha256:" + std::string(64, 'e');
  Status no_blob = c.get_blob(
      "test/app", absent, 0, [](const char*, size_t) { return Status(); }, nullptr);
  ASSERT_FALSE(no_blob.ok());
  EXPECT_EQ(no_blob.error().message(), "GET " + reg_.url("/v2/test/app/blobs/" + absent) +
                                           ": blob unknown to registry (HTTP 404)");
}

TEST_F(RegistryLive, HtpasswdBasicAuth) {
  start(true);
  if (IsSkipped() || HasFatalFailure()) return;
  RegistryClient anon(reg_.host(), {}, std::nullopt);
  auto denied = anon.get_manifest("test/app", "v1");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().message(), "GET " + reg_.url("/v2/test/app/manifests/v1") +
                                          ": authentication required (HTTP 401)");
  EXPECT_EQ(denied.error().hint, "run 'berth login " + reg_.host() + "'");

  RegistryClient wrong(reg_.host(), {}, Credentials{"user", "nope", ""});
  Status bad = wrong.check_login();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "GET " + reg_.url("/v2/") + ": registry " + reg_.host() +
                                       " rejected the credentials (HTTP 401)");
  EXPECT_EQ(bad.error().hint, "check the credentials given to 'berth login " + reg_.host() + "'");

  RegistryClient good(reg_.host(), {}, Credentials{"user", "pass", ""});
  ASSERT_TRUE(good.check_login().ok());
  auto m = good.get_manifest("test/app", "v1");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->body, manifest_);
  std::string got;
  bool restarted = false;
  ASSERT_TRUE(fetch(good, 1000, &got, &restarted).ok());
  EXPECT_EQ(got, layer_.substr(1000));
}

}  // namespace
}  // namespace berth

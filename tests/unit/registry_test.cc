#include "image/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/sha256.h"
#include "fake_http_server.h"
#include "image/http.h"

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
  EXPECT_EQ(m.error().op, "GET");
  EXPECT_EQ(m.error().subject, "http://127.0.0.1:" + std::to_string(port) + "/v2/a/manifests/v1");
  EXPECT_NE(m.error().detail.find("onnect"), std::string::npos) << m.error().detail;
}

}  // namespace
}  // namespace berth

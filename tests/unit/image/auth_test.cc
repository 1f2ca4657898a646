#include "image/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/base64.h"
#include "core/fs.h"
#include "image/http.h"
#include "test_util.h"

namespace berth {
namespace {

TEST(WwwAuthenticate, BearerWithQuotedParams) {
  auto ch = parse_www_authenticate(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull")");
  ASSERT_TRUE(ch.ok()) << ch.error().message();
  EXPECT_EQ(ch->scheme, "Bearer");
  EXPECT_EQ(ch->params.size(), 3u);
  EXPECT_EQ(ch->params.at("realm"), "https://auth.docker.io/token");
  EXPECT_EQ(ch->params.at("service"), "registry.docker.io");
  EXPECT_EQ(ch->params.at("scope"), "repository:library/alpine:pull");
}

TEST(WwwAuthenticate, CommasInsideQuotesSpacesAndEscapes) {
  auto ch = parse_www_authenticate(
      R"(  bearer  Realm = "http://a/t?x=1" , scope="repository:a/b:pull,push",  error=insufficient_scope, note="say \"hi\"\\")");
  ASSERT_TRUE(ch.ok()) << ch.error().message();
  EXPECT_EQ(ch->scheme, "bearer");
  EXPECT_EQ(ch->params.at("realm"), "http://a/t?x=1");
  EXPECT_EQ(ch->params.at("scope"), "repository:a/b:pull,push");
  EXPECT_EQ(ch->params.at("error"), "insufficient_scope");
  EXPECT_EQ(ch->params.at("note"), "say \"hi\"\\");
}

TEST(WwwAuthenticate, BasicAndBareScheme) {
  auto ch = parse_www_authenticate(R"(Basic realm="Registry Realm")");
  ASSERT_TRUE(ch.ok());
  EXPECT_EQ(ch->scheme, "Basic");
  EXPECT_EQ(ch->params.at("realm"), "Registry Realm");
  auto bare = parse_www_authenticate("Basic");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->params.empty());
}

TEST(WwwAuthenticate, Malformed) {
  auto empty = parse_www_authenticate("   ");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message(), "parse WWW-Authenticate '   ': no authentication scheme");
  auto unterminated = parse_www_authenticate(R"(Bearer realm="https://x)");
  ASSERT_FALSE(unterminated.ok());
  EXPECT_EQ(
      unterminated.error().message(),
      R"(parse WWW-Authenticate 'Bearer realm="https://x': unterminated quoted value for "realm")");
  EXPECT_FALSE(parse_www_authenticate("Bearer realm").ok());
}

TEST(CredentialKey, DockerHubFoldsOthersAreHostPort) {
  for (const char* n : {"docker.io", "index.docker.io", "registry-1.docker.io",
                        "https://index.docker.io/v1/", "Docker.IO"}) {
    EXPECT_EQ(credential_key(n), "https://index.docker.io/v1/") << n;
  }
  EXPECT_EQ(credential_key("ghcr.io"), "ghcr.io");
  EXPECT_EQ(credential_key("myreg:5000"), "myreg:5000");
  EXPECT_EQ(credential_key("https://myreg:5000/v2/"), "myreg:5000");
  EXPECT_EQ(credential_key("http://127.0.0.1:5000"), "127.0.0.1:5000");
}

TEST(Base64, RoundTripAndErrors) {
  EXPECT_EQ(base64_encode("user:pass"), "dXNlcjpwYXNz");
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(*base64_decode("dXNlcjpwYXNz"), "user:pass");
  EXPECT_EQ(*base64_decode("YQ=="), "a");
  EXPECT_EQ(*base64_decode("YQ"), "a");  // padding dropped by the writer
  EXPECT_EQ(*base64_decode("YWI="), "ab");
  EXPECT_FALSE(base64_decode("a!b=").has_value());
}

class CredentialStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path;
    ::setenv("BERTH_CONFIG_DIR", (dir_ + "/cfg/berth").c_str(), 1);
    ::setenv("DOCKER_CONFIG", (dir_ + "/docker").c_str(), 1);
    ASSERT_TRUE(make_dirs(dir_ + "/docker").ok());
  }
  void TearDown() override {
    ::unsetenv("BERTH_CONFIG_DIR");
    ::unsetenv("DOCKER_CONFIG");
  }
  void write_docker(const std::string& text) {
    ASSERT_TRUE(write_file_atomic(dir_ + "/docker/config.json", text).ok());
  }
  TempDir tmp_{"auth"};
  std::string dir_;
};

TEST_F(CredentialStoreTest, MissingFilesAreEmpty) {
  auto s = CredentialStore::load();
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->berth_file, dir_ + "/cfg/berth/auth.json");
  EXPECT_EQ(s->docker_file, dir_ + "/docker/config.json");
  EXPECT_FALSE(s->find("ghcr.io").has_value());
}

TEST_F(CredentialStoreTest, ReadsDockerConfigForms) {
  write_docker(R"({"auths":{
    "https://index.docker.io/v1/": {"auth": "aHViOnNlY3JldDpjb2xvbg=="},
    "https://myreg:5000/v2/": {"username": "u2", "password": "p2"},
    "tok.example": {"auth": "PHRva2VuPjo=", "identitytoken": "refresh-me"},
    "helper.example": {}
  }, "credsStore": "desktop"})");
  auto s = CredentialStore::load();
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto hub = s->find("docker.io");
  ASSERT_TRUE(hub.has_value());
  EXPECT_EQ(hub->username, "hub");
  EXPECT_EQ(hub->password, "secret:colon");  // only the first ':' splits
  auto mine = s->find("myreg:5000");
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->username, "u2");
  EXPECT_EQ(mine->password, "p2");
  auto tok = s->find("tok.example");
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ(tok->identity_token, "refresh-me");
  EXPECT_FALSE(s->find("helper.example").has_value());
  EXPECT_FALSE(s->find("myreg").has_value());
}

TEST_F(CredentialStoreTest, MalformedJsonNamesTheFile) {
  write_docker("{\"auths\": {");
  auto s = CredentialStore::load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().op.word(), "read credentials");
  EXPECT_EQ(s.error().subject, dir_ + "/docker/config.json");
  EXPECT_NE(s.error().message().find("malformed JSON"), std::string::npos);
}

TEST_F(CredentialStoreTest, BadAuthFieldNamesEntry) {
  write_docker(R"({"auths":{"r.example":{"auth":"bm9jb2xvbg=="}}})");
  auto s = CredentialStore::load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "read credentials " + dir_ +
                                     "/docker/config.json: entry \"r.example\": \"auth\" is "
                                     "not user:password");
}

TEST_F(CredentialStoreTest, SaveEraseAndPrecedence) {
  write_docker(R"({"auths":{"myreg:5000":{"auth":"ZG9ja2VyOmQ="}}})");
  auto s = CredentialStore::load();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->find("myreg:5000")->username, "docker");

  ASSERT_TRUE(s->save("myreg:5000", Credentials{"berth", "b:x", ""}).ok());
  ASSERT_TRUE(s->save("docker.io", Credentials{"hub", "h", ""}).ok());
  EXPECT_EQ(s->find("myreg:5000")->username, "berth");  // Berth's file first

  struct stat st;
  ASSERT_EQ(::stat(s->berth_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/cfg/berth").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto text = read_file(s->berth_file);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"https://index.docker.io/v1/\""), std::string::npos);
  EXPECT_NE(text->find(base64_encode("berth:b:x")), std::string::npos);

  auto again = CredentialStore::load();  // what was saved reads back
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->find("registry-1.docker.io")->password, "h");
  EXPECT_EQ(again->find("myreg:5000")->password, "b:x");

  auto erased = again->erase("myreg:5000");
  ASSERT_TRUE(erased.ok());
  EXPECT_TRUE(*erased);
  EXPECT_EQ(again->find("myreg:5000")->username, "docker");  // Docker's entry remains
  auto twice = again->erase("myreg:5000");
  ASSERT_TRUE(twice.ok());
  EXPECT_FALSE(*twice);
}

TEST_F(CredentialStoreTest, SeveralUsersPerRegistryAndTheOldFormat) {
  // A file written before "users": its one login is that user's, and stays one after a save.
  ASSERT_TRUE(make_dirs(dir_ + "/cfg/berth").ok());
  ASSERT_TRUE(
      write_file_atomic(dir_ + "/cfg/berth/auth.json",
                        R"({"auths":{"reg:5000":{"auth":")" + base64_encode("old:o") + R"("}}})")
          .ok());
  auto s = CredentialStore::load();
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->find_user("reg:5000", "old")->password, "o");
  EXPECT_FALSE(s->find_user("reg:5000", "alice").has_value());
  ASSERT_TRUE(s->save("reg:5000", Credentials{"alice", "a", ""}).ok());
  ASSERT_TRUE(s->save("reg:5000", Credentials{"bob", "b", ""}).ok());
  auto again = CredentialStore::load();
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->find("reg:5000")->username, "bob");  // the last login is the default
  for (const char* u : {"old", "alice", "bob"})
    EXPECT_EQ(again->find_user("reg:5000", u)->username, u);
  again->user = "alice";  // pull --creds-user alice
  EXPECT_EQ(again->find("reg:5000")->password, "a");
  again->user = "carol";
  EXPECT_FALSE(again->find("reg:5000").has_value());  // never another user's login
  // Docker's file holds one login per registry: its user is found by name too.
  write_docker(R"({"auths":{"other:1":{"auth":")" + base64_encode("dan:d") + R"("}}})");
  auto with_docker = CredentialStore::load();
  ASSERT_TRUE(with_docker.ok());
  EXPECT_EQ(with_docker->find_user("other:1", "dan")->password, "d");
  EXPECT_FALSE(with_docker->find_user("other:1", "eve").has_value());
  // logout -u: one user goes; the default passes to another user.
  auto gone = with_docker->erase_user("reg:5000", "bob");
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(*gone);
  EXPECT_FALSE(with_docker->find_user("reg:5000", "bob").has_value());
  ASSERT_TRUE(with_docker->find("reg:5000").has_value());
  EXPECT_NE(with_docker->find("reg:5000")->username, "bob");
  EXPECT_FALSE(*with_docker->erase_user("reg:5000", "bob"));
  EXPECT_TRUE(*with_docker->erase("reg:5000"));
  EXPECT_FALSE(with_docker->find_user("reg:5000", "alice").has_value());
}

}  // namespace
}  // namespace berth

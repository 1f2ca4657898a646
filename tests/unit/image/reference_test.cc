#include "image/reference.h"

#include <gtest/gtest.h>

#include <string>

namespace berth {
namespace {

const std::string kHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kDigest = "sha256:" + kHex;

struct Good {
  std::string input;
  std::string registry, repository, tag, digest;
};

TEST(Reference, ParsesGoodInputs) {
  const Good cases[] = {
      {"alpine", "docker.io", "library/alpine", "latest", ""},
      {"alpine:3.19", "docker.io", "library/alpine", "3.19", ""},
      {"library/alpine", "docker.io", "library/alpine", "latest", ""},
      {"docker.io/alpine", "docker.io", "library/alpine", "latest", ""},
      {"index.docker.io/alpine:3", "docker.io", "library/alpine", "3", ""},
      {"index.docker.io/nvidia/cuda:12.2.0-base", "docker.io", "nvidia/cuda", "12.2.0-base", ""},
      {"tensorflow/tensorflow:latest-gpu", "docker.io", "tensorflow/tensorflow", "latest-gpu", ""},
      {"ghcr.io/org/team/app:v1.2_rc-3", "ghcr.io", "org/team/app", "v1.2_rc-3", ""},
      {"localhost/app", "localhost", "app", "latest", ""},
      {"localhost:5000/a/b:tag", "localhost:5000", "a/b", "tag", ""},
      {"127.0.0.1:5000/app", "127.0.0.1:5000", "app", "latest", ""},
      {"[::1]:5000/app:2", "[::1]:5000", "app", "2", ""},
      {"[2001:db8::1]/app", "[2001:db8::1]", "app", "latest", ""},
      {"my-registry.example.com:443/x/y", "my-registry.example.com:443", "x/y", "latest", ""},
      {"Registry.Example.COM/app", "Registry.Example.COM", "app", "latest", ""},
      {"alpine@" + kDigest, "docker.io", "library/alpine", "", kDigest},
      {"alpine:3.19@" + kDigest, "docker.io", "library/alpine", "3.19", kDigest},
      {"localhost:5000/app@" + kDigest, "localhost:5000", "app", "", kDigest},
      {"org/a.b_c__d-e---f", "docker.io", "org/a.b_c__d-e---f", "latest", ""},
      {"foo:5000", "docker.io", "library/foo", "5000", ""},  // no '/': the ':' starts a tag
      {"localhost", "docker.io", "library/localhost", "latest", ""},
      {"busybox:_x", "docker.io", "library/busybox", "_x", ""},
      // Apptainer's and skopeo's transport, and enroot's REGISTRY#IMAGE.
      {"docker://alpine:3", "docker.io", "library/alpine", "3", ""},
      {"docker://ghcr.io/org/app", "ghcr.io", "org/app", "latest", ""},
      {"docker://127.0.0.1:5000#app:1", "127.0.0.1:5000", "app", "1", ""},
      {"docker://registry#team/app", "registry", "team/app", "latest", ""},
      {"nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3", ""},
      {"index.docker.io#alpine", "docker.io", "library/alpine", "latest", ""},
      {"localhost:5000#app@" + kDigest, "localhost:5000", "app", "", kDigest},
      {"busybox:" + std::string(128, 'a'), "docker.io", "library/busybox", std::string(128, 'a'),
       ""},
  };
  for (const Good& c : cases) {
    SCOPED_TRACE(c.input);
    auto r = parse_reference(c.input);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->registry, c.registry);
    EXPECT_EQ(r->repository, c.repository);
    EXPECT_EQ(r->tag, c.tag);
    EXPECT_EQ(r->digest, c.digest);
  }
}

struct Bad {
  std::string input;
  std::string message;
};

TEST(Reference, RejectsBadInputsWithClearMessages) {
  const std::string comp_help = "\": use a-z, 0-9 and the separators '.', '_', '__', '-'";
  const std::string tag_help =
      "\": use up to 128 letters, digits, '_', '.', '-', not starting with '.' or '-'";
  const Bad cases[] = {
      {"", "parse reference: reference is empty"},
      {"Alpine", "parse reference Alpine: repository name must be lowercase"},
      {"docker.io/Library/alpine",
       "parse reference docker.io/Library/alpine: repository name must be lowercase"},
      {"ghcr.io/Org/app:1", "parse reference ghcr.io/Org/app:1: repository name must be lowercase"},
      {"alpine:", "parse reference alpine:: invalid tag \"" + tag_help},
      {"alpine:-x", "parse reference alpine:-x: invalid tag \"-x" + tag_help},
      {"alpine:.x", "parse reference alpine:.x: invalid tag \".x" + tag_help},
      {"alpine:a:b", "parse reference alpine:a:b: invalid tag \"a:b" + tag_help},
      {"alpine:" + std::string(129, 'a'), "parse reference alpine:" + std::string(129, 'a') +
                                              ": invalid tag \"" + std::string(129, 'a') +
                                              tag_help},
      {"alpine@sha256:abc",
       "parse reference alpine@sha256:abc: invalid digest \"sha256:abc\": not 64 hex digits"},
      {"alpine@sha256:" + std::string(64, 'A'),
       "parse reference alpine@sha256:" + std::string(64, 'A') +
           ": invalid digest \"sha256:" + std::string(64, 'A') + "\": not lowercase hex"},
      {"alpine@md5:abc",
       "parse reference alpine@md5:abc: invalid digest \"md5:abc\": only sha256 digests are "
       "supported"},
      {"alpine@",
       "parse reference alpine@: invalid digest \"\": only sha256 digests are supported"},
      {"@" + kDigest, "parse reference @" + kDigest + ": repository name is empty"},
      {":tag", "parse reference :tag: repository name is empty"},
      {"localhost:5000/", "parse reference localhost:5000/: repository name is empty"},
      {"a//b", "parse reference a//b: repository name has an empty path component"},
      {"/a", "parse reference /a: repository name has an empty path component"},
      {"a/", "parse reference a/: repository name has an empty path component"},
      {"a/-b", "parse reference a/-b: invalid repository name component \"-b" + comp_help},
      {"x/_y", "parse reference x/_y: invalid repository name component \"_y" + comp_help},
      {"a/b-", "parse reference a/b-: invalid repository name component \"b-" + comp_help},
      {"a/b..c", "parse reference a/b..c: invalid repository name component \"b..c" + comp_help},
      {"a/b___c", "parse reference a/b___c: invalid repository name component \"b___c" + comp_help},
      {"a/b.-c", "parse reference a/b.-c: invalid repository name component \"b.-c" + comp_help},
      {"a b", "parse reference a b: invalid repository name component \"a b" + comp_help},
      {"ex.com/a$b",
       "parse reference ex.com/a$b: invalid repository name component \"a$b" + comp_help},
      {"-ex.com/a", "parse reference -ex.com/a: invalid registry \"-ex.com\""},
      {"ex..com/a", "parse reference ex..com/a: invalid registry \"ex..com\""},
      {"ex_x.com/a", "parse reference ex_x.com/a: invalid registry \"ex_x.com\""},
      {"localhost:/a", "parse reference localhost:/a: invalid registry \"localhost:\""},
      {"localhost:50a/a", "parse reference localhost:50a/a: invalid registry \"localhost:50a\""},
      {"[::1/a", "parse reference [::1/a: invalid registry \"[::1\""},
      {"[]:5000/a", "parse reference []:5000/a: invalid registry \"[]:5000\""},
      {"[::g]/a", "parse reference [::g]/a: invalid registry \"[::g]\""},
      {"[::1]x/a", "parse reference [::1]x/a: invalid registry \"[::1]x\""},
      {kHex, "parse reference " + kHex + ": a 64-character hex string cannot be a repository name"},
      {"docker://", "parse reference docker://: reference is empty"},
      {"ex_x#app", "parse reference ex_x#app: invalid registry \"ex_x\" before '#'"},
      {"#app", "parse reference #app: invalid registry \"\" before '#'"},
      {"a.io#b#c",
       "parse reference a.io#b#c: more than one '#': enroot's form is "
       "REGISTRY#IMAGE[:TAG]"},
      {"docker://u@a.io#b",
       "parse reference docker://u@a.io#b: a user before the registry (enroot's "
       "USER@REGISTRY#IMAGE) is taken by the Slurm plugin only: log in with `berth login -u "
       "USER REGISTRY` instead"},
      {"a.io#", "parse reference a.io#: repository name is empty"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.input);
    auto r = parse_reference(c.input);
    ASSERT_FALSE(r.ok()) << r->str();
    EXPECT_EQ(r.error().message(), c.message);
  }
}

TEST(Reference, NameLengthLimitCountsTheFullName) {
  // "docker.io/library/" is 18 characters; 237 more make exactly 255.
  std::string ok_name(237, 'a');
  EXPECT_TRUE(parse_reference(ok_name).ok());
  auto r = parse_reference(ok_name + "b");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "repository name is longer than 255 characters");
}

TEST(Reference, HexNamesThatAreNotExactly64CharactersAreFine) {
  EXPECT_TRUE(parse_reference(kHex.substr(1)).ok());
  EXPECT_TRUE(parse_reference(kHex + ":tag").ok());
}

TEST(Reference, StrIsFullyQualified) {
  EXPECT_EQ(parse_reference("alpine")->str(), "docker.io/library/alpine:latest");
  EXPECT_EQ(parse_reference("ghcr.io/o/a:1")->str(), "ghcr.io/o/a:1");
  EXPECT_EQ(parse_reference("alpine@" + kDigest)->str(), "docker.io/library/alpine@" + kDigest);
  EXPECT_EQ(parse_reference("[::1]:5000/a:b@" + kDigest)->str(), "[::1]:5000/a:b@" + kDigest);
  // Written with a '/', a registry without '.' or ':' would read back as a Docker Hub namespace.
  EXPECT_EQ(parse_reference("registry#team/app")->str(), "registry#team/app:latest");
  EXPECT_EQ(parse_reference("localhost#app")->str(), "localhost/app:latest");
  EXPECT_EQ(parse_reference("nvcr.io#nvidia/pytorch:24.01-py3")->str(),
            "nvcr.io/nvidia/pytorch:24.01-py3");
}

TEST(Reference, StrRoundTrips) {
  for (const std::string& s : std::initializer_list<std::string>{
           "alpine:3", "ghcr.io/o/a:1", "localhost:5000/a/b@" + kDigest, "x/y:z@" + kDigest,
           "index.docker.io/library/a/b", "registry#team/app", "REG#a:1",
           "0000000000#0000000000000000000nl"}) {
    SCOPED_TRACE(s);
    auto first = parse_reference(s);
    ASSERT_TRUE(first.ok());
    auto second = parse_reference(first->str());
    ASSERT_TRUE(second.ok()) << second.error().message();
    EXPECT_EQ(*first, *second);
  }
}

TEST(Reference, FamiliarDropsDockerHubAndLibrary) {
  const std::pair<std::string, std::string> cases[] = {
      {"alpine:3.19", "alpine:3.19"},
      {"docker.io/library/alpine", "alpine:latest"},
      {"nvidia/cuda:12", "nvidia/cuda:12"},
      {"library/a/b", "library/a/b:latest"},  // only one-component official names fold
      {"ghcr.io/org/app:1", "ghcr.io/org/app:1"},
      {"localhost:5000/library/app", "localhost:5000/library/app:latest"},
      {"alpine@" + kDigest, "alpine@" + kDigest},
      {"alpine:3@" + kDigest, "alpine:3@" + kDigest},
      {"registry#team/app", "registry#team/app:latest"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(parse_reference(in)->familiar(), want) << in;
}

TEST(Reference, ManifestRefPrefersDigest) {
  EXPECT_EQ(parse_reference("alpine")->manifest_ref(), "latest");
  EXPECT_EQ(parse_reference("alpine:3.19")->manifest_ref(), "3.19");
  EXPECT_EQ(parse_reference("alpine@" + kDigest)->manifest_ref(), kDigest);
  EXPECT_EQ(parse_reference("alpine:3.19@" + kDigest)->manifest_ref(), kDigest);
}

TEST(Reference, ApiHost) {
  EXPECT_EQ(parse_reference("alpine")->api_host(), "registry-1.docker.io");
  EXPECT_EQ(parse_reference("index.docker.io/x/y")->api_host(), "registry-1.docker.io");
  EXPECT_EQ(parse_reference("127.0.0.1:5000/app")->api_host(), "127.0.0.1:5000");
  EXPECT_EQ(parse_reference("[::1]:5000/app")->api_host(), "[::1]:5000");
  EXPECT_EQ(parse_reference("quay.io/a/b")->api_host(), "quay.io");
}

}  // namespace
}  // namespace berth

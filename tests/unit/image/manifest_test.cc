#include "image/manifest.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

namespace berth {

inline void PrintTo(const Platform& p, std::ostream* os) {
  *os << '"' << p.str() << '"';
}

namespace {

const std::string kConfig =
    "sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910";
const std::string kLayer1 =
    "sha256:2804bad6fe94a55f18b2b37e300919a5fd517b95aa81e95db574c0ba069a3740";
const std::string kLayer2 =
    "sha256:8a1cee436cbac1489a1883c9d886fcfc46f302c55ed4106ae31729e4f4eb9041";

const char* kDockerManifestJson = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
  "config": {
    "mediaType": "application/vnd.docker.container.image.v1+json",
    "size": 1472,
    "digest": "sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910"
  },
  "layers": [
    {
      "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "size": 3408729,
      "digest": "sha256:2804bad6fe94a55f18b2b37e300919a5fd517b95aa81e95db574c0ba069a3740"
    },
    {
      "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
      "size": 0,
      "digest": "sha256:8a1cee436cbac1489a1883c9d886fcfc46f302c55ed4106ae31729e4f4eb9041"
    }
  ]
})";

// OCI manifests may leave out mediaType; this one does, and carries annotations.
const char* kOciManifestJson = R"({
  "schemaVersion": 2,
  "config": {
    "mediaType": "application/vnd.oci.image.config.v1+json",
    "digest": "sha256:b79606fb3afea5bd1609ed40b622142f1c98125abcfe89a76a661b0e8e343910",
    "size": 581
  },
  "layers": [
    {
      "mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
      "digest": "sha256:2804bad6fe94a55f18b2b37e300919a5fd517b95aa81e95db574c0ba069a3740",
      "size": 29126484,
      "annotations": {"org.opencontainers.image.title": "rootfs"}
    }
  ],
  "annotations": {"org.opencontainers.image.created": "2024-01-05T10:00:00Z"}
})";

const char* kDockerListJson = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
  "manifests": [
    {
      "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
      "size": 528,
      "digest": "sha256:5861314d7fccb39c2192173240eab44fa35ca66426201ca2acd0630a6258dd51",
      "platform": {"architecture": "amd64", "os": "linux"}
    },
    {
      "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
      "size": 528,
      "digest": "sha256:50b8c3e55c3365d624e7e10ae6a783d525e02b16924d4dcff0611f3e2544efaf",
      "platform": {"architecture": "arm", "os": "linux", "variant": "v6"}
    },
    {
      "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
      "size": 528,
      "digest": "sha256:5ba6c8710dd1369ce61603ab9b7a81b25f92d4a9f74956ab72a7ea75884f07ee",
      "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}
    },
    {
      "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
      "size": 528,
      "digest": "sha256:f69162950f235e3cdbbad33f1f912d1a504be90d8a37d002c735d6f3e3882265",
      "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}
    }
  ]
})";

// As buildx pushes it: an attestation manifest under unknown/unknown, listed first
// here to check that it is never picked.
const char* kOciIndexJson = R"({
  "schemaVersion": 2,
  "mediaType": "application/vnd.oci.image.index.v1+json",
  "manifests": [
    {
      "mediaType": "application/vnd.oci.image.manifest.v1+json",
      "digest": "sha256:f745a15153c4dacf0ea4bbf57265e73283941f8335939b33c693975315cf5916",
      "size": 566,
      "annotations": {
        "vnd.docker.reference.digest": "sha256:5861314d7fccb39c2192173240eab44fa35ca66426201ca2acd0630a6258dd51",
        "vnd.docker.reference.type": "attestation-manifest"
      },
      "platform": {"architecture": "unknown", "os": "unknown"}
    },
    {
      "mediaType": "application/vnd.oci.image.manifest.v1+json",
      "digest": "sha256:5861314d7fccb39c2192173240eab44fa35ca66426201ca2acd0630a6258dd51",
      "size": 1033,
      "platform": {"architecture": "amd64", "os": "linux"}
    },
    {
      "mediaType": "application/vnd.oci.image.manifest.v1+json",
      "digest": "sha256:f69162950f235e3cdbbad33f1f912d1a504be90d8a37d002c735d6f3e3882265",
      "size": 1033,
      "platform": {"architecture": "arm64", "os": "linux"}
    },
    {
      "mediaType": "application/vnd.oci.image.manifest.v1+json",
      "digest": "sha256:6ff39ad64fc78addfe205e809111bee54caf0f35447e077658ed3c9b7025c3af",
      "size": 1033
    }
  ]
})";

const std::string kDockerList(media::kDockerManifestList);
const std::string kOciIndex(media::kOciIndex);

TEST(Manifest, AcceptHeaderListsAllFourTypes) {
  EXPECT_EQ(media::accept_header(),
            "application/vnd.oci.image.index.v1+json, "
            "application/vnd.oci.image.manifest.v1+json, "
            "application/vnd.docker.distribution.manifest.list.v2+json, "
            "application/vnd.docker.distribution.manifest.v2+json");
}

TEST(Manifest, IsIndexMediaType) {
  EXPECT_TRUE(is_index_media_type(media::kDockerManifestList));
  EXPECT_TRUE(is_index_media_type(media::kOciIndex));
  EXPECT_FALSE(is_index_media_type(media::kOciManifest));
  EXPECT_FALSE(is_index_media_type(media::kDockerManifest));
  EXPECT_FALSE(is_index_media_type(""));
}

TEST(Manifest, DetectMediaType) {
  // The body's own mediaType wins over the header.
  EXPECT_EQ(detect_manifest_media_type(kDockerManifestJson, "application/json"),
            media::kDockerManifest);
  EXPECT_EQ(detect_manifest_media_type(kDockerListJson, std::string(media::kOciIndex)),
            media::kDockerManifestList);
  // Then the Content-Type, without parameters.
  EXPECT_EQ(detect_manifest_media_type(kOciManifestJson,
                                       "application/vnd.oci.image.manifest.v1+json; charset=utf-8"),
            media::kOciManifest);
  EXPECT_EQ(detect_manifest_media_type(R"({"schemaVersion":2,"manifests":[]})",
                                       "application/vnd.docker.distribution.manifest.list.v2+json"),
            media::kDockerManifestList);
  // Then inference from the fields; generic content types say nothing.
  EXPECT_EQ(detect_manifest_media_type(kOciManifestJson, ""), media::kOciManifest);
  EXPECT_EQ(detect_manifest_media_type(kOciManifestJson, "application/json"), media::kOciManifest);
  EXPECT_EQ(detect_manifest_media_type(R"({"schemaVersion":2,"manifests":[]})", "text/plain"),
            media::kOciIndex);
  EXPECT_EQ(detect_manifest_media_type(R"({"schemaVersion":1,"fsLayers":[]})", ""),
            "application/vnd.docker.distribution.manifest.v1+json");
  // Not JSON: only the header is left.
  EXPECT_EQ(detect_manifest_media_type("<html>", "text/html; charset=utf-8"), "text/html");
  EXPECT_EQ(detect_manifest_media_type("{}", ""), "");
}

TEST(Manifest, ParsesDockerManifest) {
  auto m = parse_image_manifest(kDockerManifestJson, media::kDockerManifest);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->media_type, media::kDockerManifest);
  EXPECT_EQ(m->config.media_type, media::kDockerConfig);
  EXPECT_EQ(m->config.digest, kConfig);
  EXPECT_EQ(m->config.size, 1472);
  ASSERT_EQ(m->layers.size(), 2u);
  EXPECT_EQ(m->layers[0].media_type, media::kDockerLayerGzip);
  EXPECT_EQ(m->layers[0].digest, kLayer1);
  EXPECT_EQ(m->layers[0].size, 3408729);
  EXPECT_EQ(m->layers[1].digest, kLayer2);
  EXPECT_EQ(m->layers[1].size, 0);
  EXPECT_TRUE(m->layers[0].annotations.is_null());
  EXPECT_FALSE(m->layers[0].platform.has_value());
}

TEST(Manifest, ParsesOciManifestWithoutMediaTypeField) {
  auto m = parse_image_manifest(kOciManifestJson, "");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->media_type, media::kOciManifest);
  EXPECT_EQ(m->config.media_type, media::kOciConfig);
  ASSERT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->layers[0].media_type, media::kOciLayerZstd);
  EXPECT_EQ(m->layers[0].size, 29126484);
  EXPECT_EQ(m->layers[0].annotations["org.opencontainers.image.title"], "rootfs");
}

TEST(Manifest, ParsesManifestWithNoLayers) {
  auto m = parse_image_manifest(R"({"schemaVersion":2,"config":{"mediaType":
      "application/vnd.oci.image.config.v1+json","size":2,"digest":")" +
                                    kConfig + R"("},"layers":[]})",
                                media::kOciManifest);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_TRUE(m->layers.empty());
}

struct BadManifest {
  std::string body;
  std::string media_type;
  std::string message;
};

std::string with_layer(const std::string& layer) {
  return R"({"schemaVersion":2,"config":{"mediaType":"x","size":1,"digest":")" + kConfig +
         R"("},"layers":[)" + layer + "]}";
}

TEST(Manifest, RejectsBadImageManifests) {
  const std::string oci(media::kOciManifest);
  const std::string p = "parse manifest " + oci + ": ";
  const BadManifest cases[] = {
      {"", oci,
       p + "malformed manifest: parse error at line 1, column 1: syntax error while parsing value "
           "- unexpected end of input; expected '[', '{', or a literal"},
      {R"({"schemaVersion": 2,)", oci,
       p + "malformed manifest: parse error at line 1, column 21: syntax error while parsing "
           "object key - unexpected end of input; expected string literal"},
      {"[1,2]", oci, p + "malformed manifest: not a JSON object"},
      {R"({"config":{},"layers":[]})", oci,
       p + "malformed manifest: schemaVersion is missing (expected 2)"},
      {R"({"schemaVersion":"2","layers":[]})", oci,
       p + "unsupported schemaVersion \"2\" (expected 2)"},
      {R"({"schemaVersion":3,"layers":[]})", oci, p + "unsupported schemaVersion 3 (expected 2)"},
      {R"({"schemaVersion":2,"layers":[]})", oci, p + "malformed manifest: config is missing"},
      {R"({"schemaVersion":2,"config":{"size":1,"digest":")" + kConfig + R"("}})", oci,
       p + "malformed manifest: layers is missing"},
      {R"({"schemaVersion":2,"config":[],"layers":[]})", oci,
       p + "malformed manifest: config: not a JSON object"},
      {R"({"schemaVersion":2,"config":{"size":1},"layers":[]})", oci,
       p + "malformed manifest: config: digest is missing"},
      {R"({"schemaVersion":2,"config":{"size":1,"digest":"sha256:abc"},"layers":[]})", oci,
       p + "malformed manifest: config: invalid digest \"sha256:abc\": not 64 hex digits"},
      {R"({"schemaVersion":2,"config":{"digest":")" + kConfig + R"("},"layers":[]})", oci,
       p + "malformed manifest: config: size must be a non-negative integer"},
      {with_layer(R"({"size":-1,"digest":")" + kLayer1 + R"("})"), oci,
       p + "malformed manifest: layers[0]: size must be a non-negative integer"},
      {with_layer(R"({"size":1.5,"digest":")" + kLayer1 + R"("})"), oci,
       p + "malformed manifest: layers[0]: size must be a non-negative integer"},
      {with_layer(R"({"size":"12","digest":")" + kLayer1 + R"("})"), oci,
       p + "malformed manifest: layers[0]: size must be a non-negative integer"},
      {with_layer(R"({"size":18446744073709551615,"digest":")" + kLayer1 + R"("})"), oci,
       p + "malformed manifest: layers[0]: size must be a non-negative integer"},
      {with_layer(R"({"size":1,"digest":")" + kLayer1 + R"("},{"size":1,"digest":"md5:00"})"), oci,
       p + "malformed manifest: layers[1]: invalid digest \"md5:00\": only sha256 digests are "
           "supported"},
      {with_layer(R"({"size":1,"digest":"SHA256:)" + kLayer1.substr(7) + R"("})"), oci,
       p + "malformed manifest: layers[0]: invalid digest \"SHA256:" + kLayer1.substr(7) +
           "\": only sha256 digests are supported"},
      {with_layer(R"({"mediaType":7,"size":1,"digest":")" + kLayer1 + R"("})"), oci,
       p + "malformed manifest: layers[0]: mediaType is not a string"},
      {with_layer(R"({"size":1,"digest":")" + kLayer1 + R"(","annotations":[]})"), oci,
       p + "malformed manifest: layers[0]: annotations is not a JSON object"},
      {kDockerListJson, kDockerList,
       "parse manifest " + kDockerList + ": expected an image manifest, got an index"},
      {kOciIndexJson, "", "parse manifest: expected an image manifest, got an index"},
      {R"({"schemaVersion":2,"blobs":[]})", "application/vnd.oci.artifact.manifest.v1+json",
       "parse manifest application/vnd.oci.artifact.manifest.v1+json: unsupported manifest media "
       "type \"application/vnd.oci.artifact.manifest.v1+json\""},
  };
  for (const BadManifest& c : cases) {
    SCOPED_TRACE(c.body);
    auto m = parse_image_manifest(c.body, c.media_type);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().message(), c.message);
  }
}

TEST(Manifest, RejectsSchema1WithHint) {
  const char* schema1 = R"({
    "schemaVersion": 1, "name": "library/hello", "tag": "latest", "architecture": "amd64",
    "fsLayers": [{"blobSum": "sha256:2804bad6fe94a55f18b2b37e300919a5fd517b95aa81e95db574c0ba069a3740"}],
    "history": [{"v1Compatibility": "{}"}]
  })";
  for (std::string mt : {"application/vnd.docker.distribution.manifest.v1+prettyjws",
                         "application/vnd.docker.distribution.manifest.v1+json", ""}) {
    SCOPED_TRACE(mt);
    auto m = parse_image_manifest(schema1, mt);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().detail, "Docker schema 1 manifests are not supported");
    EXPECT_NE(m.error().hint.find("skopeo copy --format v2s2"), std::string::npos);
  }
  // Even a body that is not JSON is refused for what its media type says it is.
  auto m = parse_image_manifest("signed junk",
                                "application/vnd.docker.distribution.manifest.v1+prettyjws");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message(),
            "parse manifest application/vnd.docker.distribution.manifest.v1+prettyjws: Docker "
            "schema 1 manifests are not supported");
}

TEST(Index, ParsesDockerManifestList) {
  auto idx = parse_index(kDockerListJson, media::kDockerManifestList);
  ASSERT_TRUE(idx.ok()) << idx.error().message();
  EXPECT_EQ(idx->media_type, media::kDockerManifestList);
  ASSERT_EQ(idx->manifests.size(), 4u);
  EXPECT_EQ(idx->manifests[0].media_type, media::kDockerManifest);
  EXPECT_EQ(idx->manifests[0].size, 528);
  EXPECT_EQ(idx->manifests[0].platform, (Platform{"linux", "amd64", ""}));
  EXPECT_EQ(idx->manifests[1].platform, (Platform{"linux", "arm", "v6"}));
  EXPECT_EQ(idx->manifests[2].platform, (Platform{"linux", "arm", "v7"}));
  // arm64/v8 keeps its declared variant, so that errors list what the index says.
  EXPECT_EQ(idx->manifests[3].platform, (Platform{"linux", "arm64", "v8"}));
}

TEST(Index, ParsesOciIndexWithAttestationAndPlatformlessEntries) {
  auto idx = parse_index(kOciIndexJson, "");
  ASSERT_TRUE(idx.ok()) << idx.error().message();
  EXPECT_EQ(idx->media_type, media::kOciIndex);
  ASSERT_EQ(idx->manifests.size(), 4u);
  EXPECT_EQ(idx->manifests[0].platform, (Platform{"unknown", "unknown", ""}));
  EXPECT_EQ(idx->manifests[0].annotations["vnd.docker.reference.type"], "attestation-manifest");
  EXPECT_FALSE(idx->manifests[3].platform.has_value());
}

TEST(Index, NormalisesPlatformAliases) {
  auto idx = parse_index(R"({"schemaVersion":2,"manifests":[
      {"size":1,"digest":")" +
                             kLayer1 + R"(","platform":{"os":"linux","architecture":"x86_64"}},
      {"size":1,"digest":")" +
                             kLayer1 + R"(","platform":{"os":"linux","architecture":"aarch64"}},
      {"size":1,"digest":")" +
                             kLayer1 + R"(","platform":{"os":"linux","architecture":"armhf"}},
      {"size":1,"digest":")" +
                             kLayer1 + R"(","platform":{"os":"linux","architecture":"we/ird"}},
      {"size":1,"digest":")" +
                             kLayer1 + R"(","platform":{"os":"linux","architecture":"a$b"}}
      ]})",
                         kOciIndex);
  ASSERT_TRUE(idx.ok()) << idx.error().message();
  EXPECT_EQ(idx->manifests[0].platform, (Platform{"linux", "amd64", ""}));
  EXPECT_EQ(idx->manifests[1].platform, (Platform{"linux", "arm64", ""}));
  EXPECT_EQ(idx->manifests[2].platform, (Platform{"linux", "arm", "v7"}));
  // What parse_platform would reject is kept as given (it then matches nothing).
  EXPECT_EQ(idx->manifests[3].platform, (Platform{"linux", "we/ird", ""}));
  EXPECT_EQ(idx->manifests[4].platform, (Platform{"linux", "a$b", ""}));
}

TEST(Index, RejectsBadIndexes) {
  const std::string p = "parse index " + kOciIndex + ": ";
  const std::string entry = R"({"size":1,"digest":")" + kLayer1 + R"(")";
  const BadManifest cases[] = {
      {"{", kOciIndex,
       p + "malformed manifest: parse error at line 1, column 2: syntax error while parsing "
           "object key - unexpected end of input; expected string literal"},
      {R"({"schemaVersion":2})", kOciIndex, p + "malformed manifest: manifests is missing"},
      {R"({"schemaVersion":2,"manifests":{}})", kOciIndex,
       p + "malformed manifest: manifests is missing"},
      {R"({"manifests":[]})", kOciIndex,
       p + "malformed manifest: schemaVersion is missing (expected 2)"},
      {R"({"schemaVersion":2,"manifests":[{"size":1,"digest":"sha256:"}]})", kOciIndex,
       p + "malformed manifest: manifests[0]: invalid digest \"sha256:\": not 64 hex digits"},
      {R"({"schemaVersion":2,"manifests":[)" + entry + R"(,"platform":"linux/amd64"}]})", kOciIndex,
       p + "malformed manifest: manifests[0]: platform is not a JSON object"},
      {R"({"schemaVersion":2,"manifests":[)" + entry + R"(,"platform":{"os":"linux"}}]})",
       kOciIndex,
       p + "malformed manifest: manifests[0]: platform needs \"os\" and \"architecture\""},
      {kDockerManifestJson, std::string(media::kDockerManifest),
       "parse index " + std::string(media::kDockerManifest) + ": expected an index, got \"" +
           std::string(media::kDockerManifest) + "\""},
  };
  for (const BadManifest& c : cases) {
    SCOPED_TRACE(c.body);
    auto idx = parse_index(c.body, c.media_type);
    ASSERT_FALSE(idx.ok());
    EXPECT_EQ(idx.error().message(), c.message);
  }
}

std::string select_digest(const IndexManifest& idx, const Platform& want) {
  auto d = select_platform(idx, want);
  return d.ok() ? d->digest : "error: " + d.error().message();
}

TEST(SelectPlatform, PicksByArchitectureAndVariant) {
  auto list = *parse_index(kDockerListJson, kDockerList);
  const std::string amd64 =
      "sha256:5861314d7fccb39c2192173240eab44fa35ca66426201ca2acd0630a6258dd51";
  const std::string armv6 =
      "sha256:50b8c3e55c3365d624e7e10ae6a783d525e02b16924d4dcff0611f3e2544efaf";
  const std::string armv7 =
      "sha256:5ba6c8710dd1369ce61603ab9b7a81b25f92d4a9f74956ab72a7ea75884f07ee";
  const std::string arm64 =
      "sha256:f69162950f235e3cdbbad33f1f912d1a504be90d8a37d002c735d6f3e3882265";
  EXPECT_EQ(select_digest(list, {"linux", "amd64", ""}), amd64);
  EXPECT_EQ(select_digest(list, {"linux", "arm", "v7"}), armv7);
  EXPECT_EQ(select_digest(list, {"linux", "arm", "v6"}), armv6);
  EXPECT_EQ(select_digest(list, {"linux", "arm", ""}), armv6);  // no variant wanted: first arm
  EXPECT_EQ(select_digest(list, {"linux", "arm64", ""}), arm64);
  EXPECT_EQ(select_digest(list, {"linux", "arm64", "v8"}), arm64);
  EXPECT_EQ(select_digest(list, *parse_platform("linux/aarch64")), arm64);
}

TEST(SelectPlatform, PrefersExactVariantOverUnsetOne) {
  auto idx = *parse_index(R"({"schemaVersion":2,"manifests":[
      {"size":1,"digest":")" + kLayer1 +
                              R"(","platform":{"os":"linux","architecture":"arm"}},
      {"size":1,"digest":")" + kLayer2 +
                              R"(","platform":{"os":"linux","architecture":"arm","variant":"v7"}}
      ]})",
                          kOciIndex);
  EXPECT_EQ(select_digest(idx, {"linux", "arm", "v7"}), kLayer2);
  EXPECT_EQ(select_digest(idx, {"linux", "arm", "v5"}), kLayer1);
}

TEST(SelectPlatform, SkipsAttestationsAndPlatformlessEntries) {
  auto idx = *parse_index(kOciIndexJson, kOciIndex);
  EXPECT_EQ(select_digest(idx, {"linux", "amd64", ""}),
            "sha256:5861314d7fccb39c2192173240eab44fa35ca66426201ca2acd0630a6258dd51");
  EXPECT_EQ(select_digest(idx, {"linux", "arm64", "v8"}),
            "sha256:f69162950f235e3cdbbad33f1f912d1a504be90d8a37d002c735d6f3e3882265");
  EXPECT_EQ(select_digest(idx, {"unknown", "unknown", ""}),
            "error: select platform unknown/unknown: no image for platform unknown/unknown in " +
                kOciIndex + "; available: linux/amd64, linux/arm64");
}

TEST(SelectPlatform, NoMatchListsWhatIsAvailable) {
  auto list = *parse_index(kDockerListJson, kDockerList);
  auto d = select_platform(list, {"linux", "riscv64", ""});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message(),
            "select platform linux/riscv64: no image for platform linux/riscv64 in "
            "application/vnd.docker.distribution.manifest.list.v2+json; available: linux/amd64, "
            "linux/arm/v6, linux/arm/v7, linux/arm64/v8");

  auto arm = select_platform(list, {"linux", "arm", "v5"});
  ASSERT_FALSE(arm.ok());
  EXPECT_EQ(arm.error().detail,
            "no image for platform linux/arm/v5 in "
            "application/vnd.docker.distribution.manifest.list.v2+json; available: linux/amd64, "
            "linux/arm/v6, linux/arm/v7, linux/arm64/v8");

  IndexManifest empty{"", {}};
  EXPECT_EQ(select_platform(empty, {"linux", "amd64", ""}).error().detail,
            "no image for platform linux/amd64 in the index; available: none");
}

TEST(Layer, CompressionByMediaType) {
  const std::pair<std::string, Compression> cases[] = {
      {"application/vnd.docker.image.rootfs.diff.tar.gzip", Compression::kGzip},
      {"application/vnd.oci.image.layer.v1.tar", Compression::kNone},
      {"application/vnd.oci.image.layer.v1.tar+gzip", Compression::kGzip},
      {"application/vnd.oci.image.layer.v1.tar+zstd", Compression::kZstd},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar", Compression::kNone},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", Compression::kGzip},
      {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", Compression::kZstd},
  };
  for (const auto& [mt, want] : cases) {
    auto c = layer_compression(mt);
    ASSERT_TRUE(c.ok()) << mt;
    EXPECT_EQ(*c, want) << mt;
  }
}

TEST(Layer, UnknownAndForeignTypesAreErrors) {
  EXPECT_EQ(layer_compression("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip")
                .error()
                .message(),
            "unpack layer application/vnd.docker.image.rootfs.foreign.diff.tar.gzip: foreign "
            "(Windows) layers are not supported");
  EXPECT_EQ(layer_compression("application/vnd.oci.image.layer.v1.tar+bzip2").error().message(),
            "unpack layer application/vnd.oci.image.layer.v1.tar+bzip2: unsupported layer media "
            "type");
  EXPECT_EQ(layer_compression("").error().message(), "unpack layer: unsupported layer media type");
}

}  // namespace
}  // namespace berth

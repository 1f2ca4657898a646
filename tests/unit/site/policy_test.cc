// The site policy (site/config.h, site/policy.h): every key parsed, bad types named by file
// and key, the user's file merged in without loosening, the file-trust rule, the checks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "core/env_list.h"
#include "core/fs.h"
#include "site/config.h"
#include "site/policy.h"

namespace berth {
namespace {

/// The words of engine choices, as a policy spelled them.
std::vector<std::string> spelled(const std::vector<EngineChoice>& engines) {
  std::vector<std::string> out;
  out.reserve(engines.size());
  for (const EngineChoice& e : engines) out.emplace_back(e.spelled);
  return out;
}

/// The test's temporary folder, as realpath() gives it (no trailing slash, no symlink).
std::string temp_dir() {
  char real[PATH_MAX];
  return ::realpath(::testing::TempDir().c_str(), real) != nullptr ? real : "/tmp";
}

constexpr const char* kSite = "/etc/berth/berth.conf";
constexpr const char* kUser = "/home/u/.config/berth/berth.conf";

constexpr const char* kFullPolicy = R"(
allowed_registries = ["docker.io", "127.0.0.1:5000", "*.example.org"]
insecure_registries = ["registry.lan:5000"]
site_mounts = ["/scratch:/scratch", "/apps:/apps:ro"]
deny_mount_destinations = ["/etc", "/var"]
allow_mount_sources = ["/home", "/scratch"]
mount_home = true
readonly = true
default_engine = "userns"
allowed_engines = ["userns", "proot"]
driver_root = "/opt/driver"
dev_root = "/opt/dev"
gpus = "all"
lock = ["readonly", "driver_root"]
central_store = "/shared/berth"
squash_options = "-comp lz4"
store_format = "squashfs"
runtime_dir = "/dev/shm/berth"
pull_low_speed_limit = 2048
pull_low_speed_time = 30
pull_deadline = 600

[registry_mirrors]
"docker.io" = ["http://mirror.lan:5000", "mirror2.lan/hub"]
"ghcr.io" = "ghcr-mirror.lan"

[env]
set = { SITE = "cscs", EMPTY = "" }
prepend = { PATH = "/site/bin" }
append = { LD_LIBRARY_PATH = "/site/lib" }
unset = ["SECRET"]
)";

TEST(SitePolicy, ParsesEveryKey) {
  auto l = parse_policy(kFullPolicy, kSite, true);
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->path, kSite);
  using V = std::vector<std::string>;
  EXPECT_EQ(*l->allowed_registries, (V{"docker.io", "127.0.0.1:5000", "*.example.org"}));
  EXPECT_EQ(*l->insecure_registries, V{"registry.lan:5000"});
  EXPECT_EQ(l->registry_mirrors->at("docker.io"), (V{"http://mirror.lan:5000", "mirror2.lan/hub"}));
  EXPECT_EQ(l->registry_mirrors->at("ghcr.io"), V{"ghcr-mirror.lan"});
  EXPECT_EQ(*l->site_mounts, (V{"/scratch:/scratch", "/apps:/apps:ro"}));
  EXPECT_EQ(*l->deny_mount_destinations, (V{"/etc", "/var"}));
  EXPECT_EQ(*l->allow_mount_sources, (V{"/home", "/scratch"}));
  EXPECT_EQ(l->mount_home, true);
  EXPECT_EQ(l->readonly, true);
  EXPECT_EQ(l->default_engine, default_engine());
  EXPECT_EQ(spelled(*l->allowed_engines), (V{"userns", "proot"}));
  EXPECT_EQ((*l->allowed_engines)[1].row, find_engine("proot"));
  EXPECT_EQ(l->driver_root, "/opt/driver");
  EXPECT_EQ(l->dev_root, "/opt/dev");
  EXPECT_EQ(l->gpus, "all");
  EXPECT_EQ(*l->lock, (V{"readonly", "driver_root"}));
  EXPECT_EQ(l->central_store, "/shared/berth");
  EXPECT_EQ(l->squash_options, "-comp lz4");
  EXPECT_EQ(l->store_format, "squashfs");
  EXPECT_EQ(l->runtime_dir, "/dev/shm/berth");
  EXPECT_EQ(l->pull_low_speed_limit, 2048);
  EXPECT_EQ(l->pull_low_speed_time, 30);
  EXPECT_EQ(l->pull_deadline, 600);
  using K = EnvEdit::Kind;
  // set, prepend, append, unset in that order whatever the file's order.
  EXPECT_EQ(*l->env, (std::vector<EnvEdit>{{K::kSet, "EMPTY", ""},
                                           {K::kSet, "SITE", "cscs"},
                                           {K::kPrepend, "PATH", "/site/bin"},
                                           {K::kAppend, "LD_LIBRARY_PATH", "/site/lib"},
                                           {K::kUnset, "SECRET", ""}}));
}

TEST(SitePolicy, AnEmptyFileSetsNothing) {
  auto l = parse_policy("# nothing\n", kSite, true);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->allowed_registries);
  SiteConfig c = merge_policy(*l, {});
  EXPECT_FALSE(c.allowed_registries);
  EXPECT_TRUE(check_registry_allowed(c, "anything.io").ok());
  EXPECT_TRUE(c.sources.empty());
}

TEST(SitePolicy, BadValuesAreNamedByFileLineAndKey) {
  struct Case {
    const char* text;
    const char* detail;
  };
  for (const Case& t : {
           Case{"allowed_registries = \"docker.io\"",
                "line 1: \"allowed_registries\" is not a list of strings"},
           Case{"\n\ninsecure_registries = [1]",
                "line 3: \"insecure_registries\" is not a list of strings"},
           Case{"registry_mirrors = [\"x\"]",
                "line 1: \"registry_mirrors\" is not a table of registry = [mirrors]"},
           Case{"[registry_mirrors]\n\"docker.io\" = 5",
                "line 2: \"registry_mirrors.docker.io\" is not a list of strings"},
           Case{"site_mounts = [\"/a\"]",
                "line 1: \"site_mounts\" holds \"/a\", not SOURCE:DESTINATION[:ro|:rw] with "
                "absolute paths"},
           Case{"site_mounts = [\"/a:/b:rx\"]",
                "line 1: \"site_mounts\" holds \"/a:/b:rx\", not SOURCE:DESTINATION[:ro|:rw] with "
                "absolute paths"},
           Case{"deny_mount_destinations = [\"etc\"]",
                "line 1: \"deny_mount_destinations\" holds a path that is not absolute: \"etc\""},
           Case{"allow_mount_sources = \"/home\"",
                "line 1: \"allow_mount_sources\" is not a list of strings"},
           Case{"mount_home = \"yes\"", "line 1: \"mount_home\" is not true or false"},
           Case{"readonly = 1", "line 1: \"readonly\" is not true or false"},
           Case{"default_engine = [\"userns\"]", "line 1: \"default_engine\" is not a string"},
           Case{"allowed_engines = \"userns\"",
                "line 1: \"allowed_engines\" is not a list of strings"},
           Case{"default_engine = \"docker\"",
                "line 1: \"default_engine\" names \"docker\", which is not an engine (userns, oci, "
                "proot, fakechroot, apptainer, auto)"},
           Case{"allowed_engines = [\"userns\", \"runc\"]",
                "line 1: \"allowed_engines\" names \"runc\", which is not an engine (userns, oci, "
                "proot, fakechroot, apptainer, auto)"},
           Case{"allowed_engines = [\"auto\"]",
                "line 1: \"allowed_engines\" names \"auto\", a choice among engines rather than "
                "one to allow"},
           Case{"[mpi.mpich]\nlibraries = [\"/l/libmpi.so.12\"]\nabi = \"loose\"",
                "line 3: \"mpi.mpich.abi\" is not \"major\" or \"full\" or \"strict\": \"loose\""},
           Case{"driver_root = \"opt\"",
                "line 1: \"driver_root\" is not an absolute path: \"opt\""},
           Case{"dev_root = 3", "line 1: \"dev_root\" is not a string"},
           Case{"gpus = 2", "line 1: \"gpus\" is not a string"},
           Case{"central_store = \"shared\"",
                "line 1: \"central_store\" is not an absolute path: \"shared\""},
           Case{"squash_options = [\"-comp\"]", "line 1: \"squash_options\" is not a string"},
           Case{"store_format = \"squash\"",
                "line 1: \"store_format\" is not \"layers\" or \"squashfs\": \"squash\""},
           Case{"store_format = 1", "line 1: \"store_format\" is not a string"},
           Case{"root_emulation = \"fake\"",
                "line 1: \"root_emulation\" is not \"auto\" or \"subids\" or \"seccomp\" or "
                "\"none\": \"fake\""},
           Case{"runtime_dir = true", "line 1: \"runtime_dir\" is not a string"},
           Case{"pull_deadline = -1",
                "line 1: \"pull_deadline\" is not a whole number of 0 to 1000000000"},
           Case{"pull_low_speed_limit = 1.5",
                "line 1: \"pull_low_speed_limit\" is not a whole number of 0 to 1000000000"},
           Case{"pull_low_speed_time = \"30\"",
                "line 1: \"pull_low_speed_time\" is not a whole number of 0 to 1000000000"},
           Case{"env = \"A=1\"", "line 1: \"env\" is not a table with set, prepend, append, unset"},
           Case{"[env]\nset = [\"A=1\"]", "line 2: \"env.set\" is not a table of NAME = \"value\""},
           Case{"[env]\nset = { A = 1 }", "line 2: \"env.set.A\" is not a string"},
           Case{"[env]\nunset = \"A\"", "line 2: \"env.unset\" is not a list of strings"},
           Case{"[env]\nexport = { A = \"1\" }",
                "line 2: \"env.export\" is not a key of [env] (set, prepend, append, unset)"},
           Case{"squash_options = \"-comp lzo -noD\"",
                "line 1: \"squash_options\" holds \"-comp lzo -noD\": -comp lzo: not a compressor "
                "Berth builds with (lz4, zstd or gzip)"},
           Case{"squash_options = \"-comp zstd -noD\"",
                "line 1: \"squash_options\" holds \"-comp zstd -noD\": \"-noD\" is not an option "
                "Berth's squash takes (-comp, -Xcompression-level, -processors)"},
           Case{"squash_options = \"-comp gzip -Xcompression-level 12\"",
                "line 1: \"squash_options\" holds \"-comp gzip -Xcompression-level 12\": gzip: "
                "level 12 is out of range 1-9"},
           Case{"lock = [\"allowed_registries\"]",
                "line 1: \"lock\" names \"allowed_registries\", which cannot be locked (readonly, "
                "default_engine, driver_root, dev_root, gpus, ib, mount_home, squash_options, "
                "store_format, root_emulation)"},
           Case{"alowed_registries = []", "line 1: \"alowed_registries\" is not a key Berth knows"},
       }) {
    SCOPED_TRACE(t.text);
    auto l = parse_policy(t.text, kSite, true);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.error().message(), std::string("read config ") + kSite + ": " + t.detail);
    EXPECT_EQ(l.error().message().find('\n'), std::string::npos);
  }
}

TEST(SitePolicy, SquashOptionsComeFromThePolicyUnderTheCommandLine) {
  auto site = parse_policy("squash_options = \"-comp zstd -Xcompression-level 3 -processors 2\"",
                           kSite, true);
  ASSERT_TRUE(site.ok()) << site.error().message();
  SiteConfig c = merge_policy(*site, {});
  auto none = effective_squash_options(c, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->compressor, "zstd");
  EXPECT_EQ(none->level, 3);
  EXPECT_EQ(none->workers, 2u);
  // A level alone keeps the policy's compressor; another compressor drops the policy's level.
  auto level = effective_squash_options(c, {std::nullopt, 19});
  ASSERT_TRUE(level.ok());
  EXPECT_EQ(level->compressor, "zstd");
  EXPECT_EQ(level->level, 19);
  auto lz4 = effective_squash_options(c, {"lz4", std::nullopt});
  ASSERT_TRUE(lz4.ok()) << lz4.error().message();
  EXPECT_EQ(lz4->compressor, "lz4");
  EXPECT_EQ(lz4->level, 0);
  EXPECT_EQ(effective_squash_options(c, {"gzip", 10}).error().message(),
            "squash gzip: level 10 is out of range 1-9");
  // No policy: Berth's defaults.
  auto plain = effective_squash_options(SiteConfig{}, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->compressor, "lz4");
  EXPECT_EQ(plain->level, 0);
}

TEST(SitePolicy, LockedSquashOptionsRefuseAnotherChoice) {
  auto site =
      parse_policy("squash_options = \"-comp zstd\"\nlock = [\"squash_options\"]", kSite, true);
  ASSERT_TRUE(site.ok()) << site.error().message();
  auto user = parse_policy("squash_options = \"-comp gzip\"", kUser, false);
  ASSERT_TRUE(user.ok());
  SiteConfig c = merge_policy(*site, {*user});
  EXPECT_EQ(c.squash_options, "-comp zstd");
  ASSERT_EQ(c.ignored.size(), 1u);
  EXPECT_EQ(c.ignored[0], std::string(kUser) + ": squash_options: locked by " + kSite);
  EXPECT_EQ(
      effective_squash_options(c, {"lz4", std::nullopt}).error().message(),
      std::string("squash --compressor lz4: the site policy ") + kSite + " locks squash_options");
  EXPECT_EQ(effective_squash_options(c, {std::nullopt, 5}).error().message(),
            std::string("squash --level 5: the site policy ") + kSite + " locks squash_options");
  // Repeating the site's choice is no change.
  EXPECT_TRUE(effective_squash_options(c, {"zstd", std::nullopt}).ok());
}

TEST(SitePolicy, StoredImagesAreJudgedByTheRegistryTheyCameFrom) {
  SiteConfig c;
  c.site_path = kSite;
  c.allowed_registries = std::vector<std::string>{"docker.io"};
  c.sources["allowed_registries"] = kSite;
  ImageRecord pulled;
  pulled.name = "docker.io/library/mine:1";  // a tag of an image pulled elsewhere
  pulled.registry = "127.0.0.1:5000";
  EXPECT_EQ(check_stored_image_allowed(c, pulled).error().message(),
            std::string("registry 127.0.0.1:5000: registry not allowed by ") + kSite +
                " (allowed_registries: docker.io)");
  ImageRecord imported;
  imported.name = "127.0.0.1:5000/local/x:1";
  imported.registry = "";
  EXPECT_TRUE(check_stored_image_allowed(c, imported).ok());
  ImageRecord older;  // a record from before Berth kept the registry: its name's
  older.name = "127.0.0.1:5000/e2e/busybox:1.0";
  EXPECT_EQ(stored_image_registry(older), "127.0.0.1:5000");
  EXPECT_FALSE(check_stored_image_allowed(c, older).ok());
  older.name = "busybox:1";
  EXPECT_TRUE(check_stored_image_allowed(c, older).ok());
}

TEST(SitePolicy, SyntaxErrorsAreOneLineWithLineAndColumn) {
  auto l = parse_policy("allowed_registries = [\n\"a\"\nreadonly = ", kSite, true);
  ASSERT_FALSE(l.ok());
  std::string msg = l.error().message();
  EXPECT_EQ(msg.rfind(std::string("read config ") + kSite + ": line 3, column ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(SitePolicy, MalformedTableHeadersAreParseErrors) {
  // Inputs fuzz_policy found: toml++ 3.3 asserted on them (undefined behaviour with NDEBUG).
  for (const char* text : {"[= { SITE = \"x\" }", "[[[1]]]", "[[=", "[&", "[[[]]"}) {
    SCOPED_TRACE(text);
    auto l = parse_policy(text, kSite, true);
    ASSERT_FALSE(l.ok());
    EXPECT_TRUE(
        l.error().message().starts_with(std::string("read config ") + kSite + ": line 1, column "))
        << l.error().message();
  }
}

TEST(SitePolicy, NonAsciiWhereWhitespaceMayBeIsAParseError) {
  // toml++ 3.3 reached __builtin_unreachable() on these (fuzz_policy found the first).
  for (const char* text : {"allowed_registries = [\xd1\x9c]", "allowed_registries = [ \xc2\xa1 ]",
                           "readonly = true \xc2\xa7", "s = \"\"\"\\\n\xc2\xa7\"\"\""}) {
    SCOPED_TRACE(text);
    auto l = parse_policy(text, kSite, true);
    ASSERT_FALSE(l.ok());
    EXPECT_TRUE(l.error().message().starts_with(std::string("read config ") + kSite + ": line "))
        << l.error().message();
  }
}

TEST(SitePolicy, OnlyTheSiteMayLock) {
  auto l = parse_policy("lock = [\"readonly\"]", kUser, false);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().message(), std::string("read config ") + kUser +
                                     ": line 1: \"lock\" is a site policy key: a user's file "
                                     "cannot lock settings");
}

PolicyLayer layer(const char* text, const char* path, bool site) {
  auto l = parse_policy(text, path, site);
  EXPECT_TRUE(l.ok()) << l.error().message();
  return l.ok() ? *l : PolicyLayer{};
}

TEST(SitePolicy, TheUserNarrowsAllowListsButCannotWidenThem) {
  PolicyLayer site = layer(R"(allowed_registries = ["docker.io", "127.0.0.1:5000"]
allowed_engines = ["userns", "proot"]
allow_mount_sources = ["/scratch", "/home"])",
                           kSite, true);
  PolicyLayer user = layer(R"(allowed_registries = ["127.0.0.1:5000", "evil.io"]
allowed_engines = ["proot", "oci"]
allow_mount_sources = ["/scratch/u", "/tmp"])",
                           kUser, false);
  SiteConfig c = merge_policy(site, {user});
  using V = std::vector<std::string>;
  EXPECT_EQ(*c.allowed_registries, V{"127.0.0.1:5000"});
  EXPECT_EQ(spelled(*c.allowed_engines), V{"proot"});
  EXPECT_EQ(*c.allow_mount_sources, V{"/scratch/u"});
  EXPECT_EQ(c.sources["allowed_registries"], std::string(kSite) + " + " + kUser);
  EXPECT_EQ(c.ignored,
            (V{std::string(kUser) + ": allowed_registries: evil.io: not allowed by " + kSite,
               std::string(kUser) + ": allowed_engines: oci: not allowed by " + kSite,
               std::string(kUser) + ": allow_mount_sources: /tmp: not under a folder " + kSite +
                   " allows"}));
  auto refused = check_registry_allowed(c, "evil.io");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), std::string("registry evil.io: registry not allowed by ") +
                                           kSite + " + " + kUser +
                                           " (allowed_registries: 127.0.0.1:5000)");
  // Without a site list, the user's own list is theirs.
  SiteConfig alone = merge_policy(std::nullopt, {user});
  EXPECT_EQ(*alone.allowed_registries, (V{"127.0.0.1:5000", "evil.io"}));
  EXPECT_EQ(alone.sources["allowed_registries"], kUser);
}

TEST(SitePolicy, AnEmptySiteListAllowsNothing) {
  SiteConfig c = merge_policy(layer("allowed_registries = []", kSite, true),
                              {layer("allowed_registries = [\"docker.io\"]", kUser, false)});
  EXPECT_TRUE(c.allowed_registries->empty());
  auto refused = check_registry_allowed(c, "docker.io");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), std::string("registry docker.io: registry not allowed by ") +
                                           kSite + " + " + kUser + " (allowed_registries: none)");
}

TEST(SitePolicy, TheUserAddsToDeniedDestinationsMountsAndEnvButRemovesNothing) {
  PolicyLayer site = layer(R"(deny_mount_destinations = ["/etc"]
site_mounts = ["/scratch:/scratch"]
insecure_registries = ["a.lan"]
[env]
set = { A = "site" })",
                           kSite, true);
  PolicyLayer user = layer(R"(deny_mount_destinations = []
site_mounts = ["/data:/data:ro"]
insecure_registries = ["b.lan"]
[env]
unset = ["A"])",
                           kUser, false);
  SiteConfig c = merge_policy(site, {user});
  using V = std::vector<std::string>;
  EXPECT_EQ(c.deny_mount_destinations, V{"/etc"});
  EXPECT_EQ(c.site_mounts, V{"/scratch:/scratch"});
  EXPECT_EQ(c.user_mounts, V{"/data:/data:ro"});
  EXPECT_EQ(c.insecure_registries, (V{"a.lan", "b.lan"}));
  using K = EnvEdit::Kind;
  EXPECT_EQ(c.env, (std::vector<EnvEdit>{{K::kSet, "A", "site"}, {K::kUnset, "A", ""}}));
  EXPECT_TRUE(c.ignored.empty());
}

TEST(SitePolicy, RootEmulationIsTheUsersUnlessTheSiteLocksIt) {
  SiteConfig plain = merge_policy(std::nullopt, {layer("root_emulation = \"none\"", kUser, false)});
  EXPECT_EQ(plain.root_emulation, RootEmulation::kNone);
  EXPECT_EQ(merge_policy(std::nullopt, {}).root_emulation, RootEmulation::kAuto);  // the default
  EXPECT_EQ(plain.sources["root_emulation"], kUser);
  PolicyLayer site =
      layer("root_emulation = \"seccomp\"\nlock = [\"root_emulation\"]", kSite, true);
  SiteConfig c = merge_policy(site, {layer("root_emulation = \"none\"", kUser, false)});
  EXPECT_EQ(c.root_emulation, RootEmulation::kSeccomp);
  EXPECT_EQ(c.ignored,
            std::vector<std::string>{std::string(kUser) + ": root_emulation: locked by " + kSite});
}

TEST(SitePolicy, LockedValuesStayTheSites) {
  PolicyLayer site = layer(R"(readonly = true
driver_root = "/site/driver"
default_engine = "userns"
allowed_engines = ["userns", "proot"]
lock = ["readonly", "driver_root"])",
                           kSite, true);
  PolicyLayer user = layer(R"(readonly = false
driver_root = "/mine"
dev_root = "/mydev"
default_engine = "proot")",
                           kUser, false);
  SiteConfig c = merge_policy(site, {user});
  EXPECT_TRUE(c.readonly);
  EXPECT_EQ(c.driver_root, "/site/driver");
  EXPECT_EQ(c.dev_root, "/mydev");                // not locked: the user's preference
  EXPECT_EQ(c.default_engine->spelled, "proot");  // allowed, not locked
  EXPECT_EQ(c.sources["readonly"], kSite);
  EXPECT_EQ(c.sources["dev_root"], kUser);
  EXPECT_EQ(c.ignored,
            (std::vector<std::string>{std::string(kUser) + ": readonly: locked by " + kSite,
                                      std::string(kUser) + ": driver_root: locked by " + kSite}));
  // An engine outside allowed_engines is no default.
  SiteConfig d = merge_policy(site, {layer("default_engine = \"oci\"", kUser, false)});
  EXPECT_EQ(d.default_engine, default_engine());
  EXPECT_EQ(d.ignored, std::vector<std::string>{std::string(kUser) +
                                                ": default_engine: oci: not in allowed_engines"});
  auto oci = check_engine_allowed(d, *parse_engine("oci"));
  ASSERT_FALSE(oci.ok());
  EXPECT_EQ(oci.error().message(), std::string("engine oci: not allowed by ") + kSite +
                                       " (allowed_engines: userns, proot)");
  auto locked = check_not_locked(c, "readonly", "--read-only=false");
  ASSERT_FALSE(locked.ok());
  EXPECT_EQ(locked.error().message(),
            std::string("run --read-only=false: the site policy ") + kSite + " locks readonly");
  EXPECT_TRUE(check_not_locked(c, "dev_root", "BERTH_DEV_ROOT=/x").ok());
}

TEST(SitePolicy, EnginesAreRowsWhicheverWordNamesThem) {
  SiteConfig c = merge_policy(layer("allowed_engines = [\"singularity\"]", kSite, true), {});
  EXPECT_TRUE(check_engine_allowed(c, *parse_engine("apptainer")).ok());  // the alias's row
  auto proot = check_engine_allowed(c, *parse_engine("proot"));
  ASSERT_FALSE(proot.ok());
  EXPECT_EQ(proot.error().message(), std::string("engine proot: not allowed by ") + kSite +
                                         " (allowed_engines: singularity)");
}

TEST(SitePolicy, MpiDeclarationsCarryTheirAbiRule) {
  PolicyLayer l = layer(R"(mpi_default = "mpich"
[mpi.mpich]
libraries = ["/opt/mpich/lib/libmpi.so.12"]
abi = "strict"
[mpi.openmpi]
libraries = ["/opt/ompi/lib/libmpi.so.40"]
mounts = ["/opt/ompi:/opt/ompi:ro"])",
                        kSite, true);
  SiteConfig c = merge_policy(l, {});
  ASSERT_EQ(c.mpi.size(), 2u);
  EXPECT_EQ(c.mpi[0].type, "mpich");
  EXPECT_EQ(c.mpi[0].abi, MpiAbiRule::kStrict);
  EXPECT_EQ(c.mpi[1].type, "openmpi");
  EXPECT_EQ(c.mpi[1].abi, MpiAbiRule::kMajor);  // the documented default when abi is not given
  EXPECT_EQ(c.mpi[1].mounts, std::vector<std::string>{"/opt/ompi:/opt/ompi:ro"});
}

TEST(SitePolicy, MirrorsTheSiteSetsAreTheSitesAndUserMirrorsMustBeAllowed) {
  PolicyLayer site = layer(R"(allowed_registries = ["docker.io", "mirror.lan", "ghcr.io"]
[registry_mirrors]
"docker.io" = ["http://mirror.lan:5000/hub/"])",
                           kSite, true);
  PolicyLayer user = layer(R"([registry_mirrors]
"docker.io" = ["mine.io"]
"ghcr.io" = ["evil.io", "mirror.lan:6000"])",
                           kUser, false);
  SiteConfig c = merge_policy(site, {user});
  std::vector<Mirror> hub = mirrors_for(c, "index.docker.io");
  ASSERT_EQ(hub.size(), 1u);
  EXPECT_EQ(hub[0].host, "mirror.lan:5000");
  EXPECT_EQ(hub[0].prefix, "hub/");
  EXPECT_TRUE(hub[0].plain_http);
  std::vector<Mirror> ghcr = mirrors_for(c, "ghcr.io");
  ASSERT_EQ(ghcr.size(), 1u);
  EXPECT_EQ(ghcr[0].host, "mirror.lan:6000");
  EXPECT_EQ(ghcr[0].prefix, "");
  EXPECT_FALSE(ghcr[0].plain_http);
  EXPECT_TRUE(mirrors_for(c, "quay.io").empty());
  EXPECT_EQ(c.ignored, (std::vector<std::string>{std::string(kUser) +
                                                     ": registry_mirrors: docker.io: " + kSite +
                                                     " sets its mirrors",
                                                 std::string(kUser) +
                                                     ": registry_mirrors: evil.io: not in the "
                                                     "allowed_registries of " +
                                                     kSite}));
}

TEST(SitePolicy, RegistryMatching) {
  EXPECT_TRUE(registry_matches("docker.io", "docker.io"));
  EXPECT_TRUE(registry_matches("registry-1.docker.io", "docker.io"));
  EXPECT_TRUE(registry_matches("Host.lan:5000", "host.lan"));  // a host alone: any port
  EXPECT_TRUE(registry_matches("host.lan:5000", "host.lan:5000"));
  EXPECT_FALSE(registry_matches("host.lan:5001", "host.lan:5000"));
  EXPECT_FALSE(registry_matches("host.lan", "host.lan:5000"));
  EXPECT_TRUE(registry_matches("a.example.org", "*.example.org"));
  EXPECT_TRUE(registry_matches("a.b.example.org:443", "*.example.org"));
  EXPECT_FALSE(registry_matches("example.org", "*.example.org"));
  EXPECT_FALSE(registry_matches("badexample.org", "*.example.org"));
  EXPECT_FALSE(registry_matches("docker.io.evil.com", "docker.io"));
}

TEST(SitePolicy, DeniedDestinationsCoverWhatIsAtUnderAndAbove) {
  SiteConfig c =
      merge_policy(layer("deny_mount_destinations = [\"/etc\", \"/opt/site/\"]", kSite, true), {});
  for (const char* bad :
       {"/etc", "/etc/", "/etc/passwd", "//etc", "/tmp/../etc/x", "/", "/opt", "/opt/site/bin"}) {
    SCOPED_TRACE(bad);
    auto st = check_mount_destination(c, bad);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, ErrorCode::kPermission);
  }
  auto st = check_mount_destination(c, "/etc/x");
  EXPECT_EQ(st.error().message(), std::string("volume /etc/x: mounting on /etc is denied by ") +
                                      kSite + " (deny_mount_destinations)");
  for (const char* ok : {"/etcetera", "/data", "/opt/other", "/tmp/etc"})
    EXPECT_TRUE(check_mount_destination(c, ok).ok()) << ok;
  EXPECT_EQ(normalize_path("/a/./b/../c//d/"), "/a/c/d");
  EXPECT_EQ(normalize_path("/../.."), "/");
  SiteConfig root = merge_policy(layer("deny_mount_destinations = [\"/\"]", kSite, true), {});
  EXPECT_FALSE(check_mount_destination(root, "/data").ok());
  SiteConfig any = merge_policy(layer("allow_mount_sources = [\"/\"]", kSite, true), {});
  EXPECT_TRUE(check_mount_source(any, "/tmp").ok());
}

TEST(SitePolicy, AllowedSourcesAreCheckedAfterSymlinks) {
  std::string dir = temp_dir() + "/berth-policy-src-" + std::to_string(getpid());
  ASSERT_TRUE(remove_tree(dir).ok());
  ASSERT_TRUE(make_dirs(dir + "/allowed/sub").ok());
  ASSERT_TRUE(make_dirs(dir + "/other").ok());
  ASSERT_EQ(::symlink((dir + "/other").c_str(), (dir + "/allowed/link").c_str()), 0);
  std::string text = "allow_mount_sources = [\"" + dir + "/allowed\"]";
  SiteConfig c = merge_policy(layer(text.c_str(), kSite, true), {});
  EXPECT_TRUE(check_mount_source(c, dir + "/allowed/sub").ok());
  EXPECT_TRUE(check_mount_source(c, dir + "/allowed").ok());
  auto st = check_mount_source(c, dir + "/allowed/link");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "volume " + dir + "/allowed/link (" + dir +
                                      "/other): not under a folder allowed by " + kSite +
                                      " (allow_mount_sources: " + dir + "/allowed)");
  EXPECT_FALSE(check_mount_source(c, dir + "/allowed/../other").ok());
  EXPECT_EQ(check_mount_source(c, dir + "/missing").error().code, ErrorCode::kNotFound);
  SiteConfig open = merge_policy(std::nullopt, {});
  EXPECT_TRUE(check_mount_source(open, dir + "/missing").ok());
  (void)remove_tree(dir);  // best effort
}

TEST(SitePolicy, EnvEditsSetPrependAppendUnset) {
  std::vector<std::string> env = {"PATH=/usr/bin", "SECRET=x", "EMPTY="};
  using K = EnvEdit::Kind;
  for (const EnvEdit& e :
       {EnvEdit{K::kPrepend, "PATH", "/site/bin"}, EnvEdit{K::kAppend, "PATH", "/late/bin"},
        EnvEdit{K::kAppend, "LD_LIBRARY_PATH", "/site/lib"}, EnvEdit{K::kPrepend, "EMPTY", "v"},
        EnvEdit{K::kUnset, "SECRET", ""}, EnvEdit{K::kSet, "SITE", "a=b"}})
    apply_env_edit(env, e);
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/site/bin:/usr/bin:/late/bin", "EMPTY=v",
                                           "LD_LIBRARY_PATH=/site/lib", "SITE=a=b"}));
}

/// A folder tree for the trust rule, owned by this test's user.
class TrustedFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir() + "/berth-policy-trust-" + std::to_string(getpid());
    ASSERT_TRUE(remove_tree(dir_).ok());
    ASSERT_TRUE(make_dirs(dir_ + "/etc", 0755).ok());
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    file_ = dir_ + "/etc/berth.conf";
    ASSERT_TRUE(write_file_atomic(file_, "readonly = true\n", 0644).ok());
    ASSERT_EQ(::chmod(file_.c_str(), 0644), 0);
  }
  void TearDown() override { (void)remove_tree(dir_); }  // best effort

  std::string dir_, file_;
};

TEST_F(TrustedFile, AFileAndFoldersOnlyTheOwnerCanWriteAreTrusted) {
  // TempDir's own parents (/tmp: sticky, writable by all) must pass as they are.
  Status st = check_trusted_file(file_, ::getuid());
  EXPECT_TRUE(st.ok()) << st.error().message();
}

TEST_F(TrustedFile, WritableByGroupOrOthersIsRefused) {
  for (mode_t mode : {0664, 0646}) {
    ASSERT_EQ(::chmod(file_.c_str(), mode), 0);
    Status st = check_trusted_file(file_, ::getuid());
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(),
              "read config " + file_ + ": refused: writable by group or others");
    EXPECT_EQ(st.error().code, ErrorCode::kPermission);
  }
  ASSERT_EQ(::chmod(file_.c_str(), 0644), 0);
  ASSERT_EQ(::chmod((dir_ + "/etc").c_str(), 0775), 0);
  Status st = check_trusted_file(file_, ::getuid());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "read config " + file_ + ": refused: folder " + dir_ +
                                      "/etc is writable by group or others");
  // A sticky folder writable by all (as /tmp) is fine: nobody can replace another's file.
  ASSERT_EQ(::chmod((dir_ + "/etc").c_str(), 01777), 0);
  EXPECT_TRUE(check_trusted_file(file_, ::getuid()).ok());
}

TEST_F(TrustedFile, ASymlinkIsJudgedByWhatItPointsAt) {
  std::string link = dir_ + "/link.conf";
  ASSERT_EQ(::symlink(file_.c_str(), link.c_str()), 0);
  EXPECT_TRUE(check_trusted_file(link, ::getuid()).ok());
  ASSERT_EQ(::chmod(file_.c_str(), 0666), 0);
  Status st = check_trusted_file(link, ::getuid());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "read config " + link + ": refused: writable by group or others");
}

TEST_F(TrustedFile, OnlyRootOwnsAPolicyWhenNoOtherOwnerIsGiven) {
  Status st = check_trusted_file(file_);
  if (::getuid() == 0) {
    // As root: the file is root's; hand it to someone else to see the refusal.
    ASSERT_EQ(::chown(file_.c_str(), 65534, 65534), 0);
    st = check_trusted_file(file_);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().message(),
              "read config " + file_ + ": refused: owned by uid 65534, not root");
    return;
  }
  ASSERT_FALSE(st.ok());
  // The folder above is checked after the file: the file itself is named first.
  EXPECT_EQ(st.error().message(), "read config " + file_ + ": refused: owned by uid " +
                                      std::to_string(::getuid()) + ", not root");
}

TEST_F(TrustedFile, LoadConfigReadsTheSitePolicyAndTheUsersFiles) {
  std::string user_dir = dir_ + "/user";
  ASSERT_TRUE(make_dirs(user_dir).ok());
  ASSERT_TRUE(write_file_atomic(user_dir + "/config.json",
                                R"({"insecure-registries": ["old.lan"], "dev_root": "/json-dev"})")
                  .ok());
  ASSERT_TRUE(
      write_file_atomic(user_dir + "/berth.conf", "readonly = false\ndev_root = \"/toml-dev\"\n")
          .ok());
  ::setenv("BERTH_SITE_CONF", file_.c_str(), 1);
  ::setenv("BERTH_CONFIG_DIR", user_dir.c_str(), 1);
  auto c = load_config();
  if (::getuid() != 0) {
    // The real rule: this user's file is no site policy.
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().message(), "read config " + file_ + ": refused: owned by uid " +
                                       std::to_string(::getuid()) + ", not root");
  } else {
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->site_path, file_);
    EXPECT_EQ(c->user_path, user_dir + "/berth.conf");
    EXPECT_EQ(c->path, user_dir + "/config.json");
    EXPECT_FALSE(c->readonly);            // not locked: the user's preference
    EXPECT_EQ(c->dev_root, "/toml-dev");  // berth.conf over config.json
    EXPECT_EQ(c->insecure_registries, std::vector<std::string>{"old.lan"});
    EXPECT_EQ(c->sources["insecure_registries"], user_dir + "/config.json");
  }
  ::setenv("BERTH_SITE_CONF", (dir_ + "/missing.conf").c_str(), 1);
  c = load_config();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "read config " + dir_ + "/missing.conf: no such file (named by BERTH_SITE_CONF)");
  ::unsetenv("BERTH_SITE_CONF");
  ::unsetenv("BERTH_CONFIG_DIR");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(SitePolicy, StoreFormatIsTheUsersUnlessLocked) {
  PolicyLayer user = layer("store_format = \"squashfs\"", kUser, false);
  SiteConfig mine = merge_policy(std::nullopt, {user});
  EXPECT_TRUE(mine.squash_store());
  EXPECT_EQ(mine.sources["store_format"], kUser);
  EXPECT_FALSE(merge_policy(std::nullopt, {}).squash_store());  // layers by default

  PolicyLayer site = layer("store_format = \"layers\"\nlock = [\"store_format\"]", kSite, true);
  SiteConfig locked = merge_policy(site, {user});
  EXPECT_FALSE(locked.squash_store());
  EXPECT_EQ(locked.ignored,
            std::vector<std::string>{std::string(kUser) + ": store_format: locked by " + kSite});
  auto refused = check_not_locked(locked, "store_format", "--squash");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            std::string("run --squash: the site policy ") + kSite + " locks store_format");
}

}  // namespace
}  // namespace berth

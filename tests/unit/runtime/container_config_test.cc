#include "runtime/container_config.h"

#include <sys/mount.h>

#include <gtest/gtest.h>

namespace berth {
namespace {

using nlohmann::json;

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/sh\n"
    "# a comment\n"
    "app:x:1234:1235:app user:/home/app:/bin/sh\n"
    "nohome:x:77:78::/:/bin/sh\n";
constexpr const char* kGroup = "root:x:0:\nstaff:x:50:app\napp:x:1235:\n";

std::string env_value(const ContainerSpec& s, const std::string& key) {
  for (const auto& kv : s.env)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return "<unset>";
}

ContainerSpec build(const json& config, const RunOptions& o, const HostContext& h = {}) {
  auto s = build_spec(config, "/rootfs", o, h, kPasswd, kGroup);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  return s.ok() ? *s : ContainerSpec{};
}

TEST(ResolveUser, Cases) {
  struct Case {
    std::string user;
    uid_t uid;
    gid_t gid;
    std::string name, home;
  };
  const Case cases[] = {
      {"0", 0, 0, "root", "/root"},
      {"root", 0, 0, "root", "/root"},
      {"app", 1234, 1235, "app", "/home/app"},
      {"1234", 1234, 1235, "app", "/home/app"},  // a uid in passwd takes its group
      {"4321", 4321, 0, "4321", "/"},            // Docker: unknown uid runs with group 0
      {"4321:4321", 4321, 4321, "4321", "/"},
      {"app:staff", 1234, 50, "app", "/home/app"},
      {"app:7", 1234, 7, "app", "/home/app"},
      {"nohome", 77, 78, "nohome", "/"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.user);
    auto r = resolve_user(c.user, kPasswd, kGroup);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->uid, c.uid);
    EXPECT_EQ(r->gid, c.gid);
    EXPECT_EQ(r->name, c.name);
    EXPECT_EQ(r->home, c.home);
  }
}

TEST(ResolveUser, Errors) {
  EXPECT_EQ(resolve_user("ghost", kPasswd, kGroup).error().message(),
            "user ghost: unable to find user ghost: no matching entries in the container's "
            "/etc/passwd");
  EXPECT_EQ(resolve_user("app:ghosts", kPasswd, kGroup).error().message(),
            "user ghosts: unable to find group ghosts: no matching entries in the container's "
            "/etc/group");
  for (const char* bad : {"", ":", "a:b:c", "app:"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(resolve_user(bad, kPasswd, kGroup).ok());
  }
  // No passwd file at all: numbers still work.
  auto r = resolve_user("1000:1000", "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->uid, 1000u);
}

TEST(ParseVolume, Cases) {
  auto v = parse_volume("/host/dir:/data");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->host, "/host/dir");
  EXPECT_EQ(v->container, "/data");
  EXPECT_FALSE(v->read_only);
  EXPECT_TRUE(parse_volume("/h:/c:ro")->read_only);
  EXPECT_FALSE(parse_volume("/h:/c:rw")->read_only);
  EXPECT_EQ(parse_volume("rel:/c").error().message(),
            "volume rel:/c: the host path must be absolute");
  EXPECT_EQ(parse_volume("/h:c").error().message(),
            "volume /h:c: the container path must be absolute");
  EXPECT_EQ(parse_volume("/h:/c:rx").error().message(),
            "volume /h:/c:rx: unknown option \"rx\" (ro, rw, nosuid, nodev, noexec, [r]private, "
            "[r]slave, [r]unbindable)");
  EXPECT_EQ(parse_volume("/h").error().message(), "volume /h: expected HOST:CONTAINER[:ro|:rw]");
  EXPECT_EQ(parse_volume("/h").error().hint,
            "use -v HOST:CONTAINER[:ro|:rw][,nosuid,...] with absolute paths");
  // Docker's comma-separated options, and the mount flags (pyxis's nosuid, nodev, noexec).
  v = parse_volume("/h:/c:ro,nosuid,nodev,noexec,rslave");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->read_only);
  EXPECT_EQ(v->flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV | MS_NOEXEC));
  EXPECT_EQ(v->propagation, static_cast<unsigned long>(MS_SLAVE | MS_REC));
  EXPECT_EQ(parse_volume("/h:/c:unbindable")->propagation,
            static_cast<unsigned long>(MS_UNBINDABLE));
  EXPECT_EQ(parse_volume("/h:/c:rslave,rprivate")->propagation, 0u);
}

TEST(ParseTmpfs, Cases) {
  auto t = parse_tmpfs("/scratch");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->container, "/scratch");
  EXPECT_EQ(t->flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV));
  EXPECT_EQ(t->data, "mode=1777");
  t = parse_tmpfs("/s:size=1m,ro,noexec,dev");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->flags, static_cast<unsigned long>(MS_NOSUID | MS_RDONLY | MS_NOEXEC));
  EXPECT_EQ(t->data, "mode=1777,size=1m");
  EXPECT_EQ(parse_tmpfs("/s:mode=700,nr_inodes=10")->data, "mode=700,nr_inodes=10");
  EXPECT_EQ(parse_tmpfs("/s:huge=within_size")->data, "mode=1777,huge=within_size");
  EXPECT_EQ(parse_tmpfs("s").error().message(),
            "volume tmpfs s: the container path must be absolute");
  EXPECT_EQ(parse_tmpfs("/s:uid=0").error().message(),
            "volume tmpfs /s:uid=0: unknown option \"uid=0\"");
  EXPECT_EQ(parse_tmpfs("/s:size=").error().message(),
            "volume tmpfs /s:size=: unknown option \"size=\"");
}

TEST(ParseEnvFile, CommentsBlankLinesAndHostValues) {
  auto vars = parse_env_file("# comment\n\n  A=1\nB=two words\nFROM_HOST\nMISSING\r\nC=\n", "f",
                             {"FROM_HOST=h", "OTHER=o"});
  ASSERT_TRUE(vars.ok());
  EXPECT_EQ(*vars, (std::vector<std::string>{"A=1", "B=two words", "FROM_HOST=h", "C="}));
  EXPECT_EQ(parse_env_file("=x\n", "vars.env", {}).error().message(),
            "read env file vars.env: line 1: invalid variable name \"\"");
}

TEST(BuildSpec, EntrypointAndCmdFollowDocker) {
  struct Case {
    const char* what;
    json config;
    RunOptions opts;
    std::vector<std::string> argv;
  };
  auto opts = [](std::vector<std::string> cmd, const char* ep = nullptr) {
    RunOptions o;
    o.command = std::move(cmd);
    if (ep) {
      o.entrypoint = ep;
      o.entrypoint_set = true;
    }
    return o;
  };
  const Case cases[] = {
      {"image Cmd", {{"Cmd", {"/bin/sh"}}}, opts({}), {"/bin/sh"}},
      {"args replace Cmd", {{"Cmd", {"/bin/sh"}}}, opts({"ls", "-l"}), {"ls", "-l"}},
      {"Entrypoint + Cmd", {{"Entrypoint", {"/ep"}}, {"Cmd", {"x"}}}, opts({}), {"/ep", "x"}},
      {"Entrypoint + args", {{"Entrypoint", {"/ep"}}, {"Cmd", {"x"}}}, opts({"y"}), {"/ep", "y"}},
      {"--entrypoint drops Cmd",
       {{"Entrypoint", {"/ep"}}, {"Cmd", {"x"}}},
       opts({}, "/other"),
       {"/other"}},
      {"--entrypoint + args", {{"Cmd", {"x"}}}, opts({"a"}, "/other"), {"/other", "a"}},
      {"--entrypoint ''", {{"Entrypoint", {"/ep"}}}, opts({"ls"}, ""), {"ls"}},
      {"null Cmd", {{"Cmd", nullptr}, {"Entrypoint", {"/ep"}}}, opts({}), {"/ep"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(build(c.config, c.opts).argv, c.argv);
  }
  auto none = build_spec(json::object(), "/r", RunOptions{}, {}, "", "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(),
            "run command: no command specified: the image has no Cmd or Entrypoint");
}

TEST(BuildSpec, EnvironmentMergesInDockerOrder) {
  json config = {{"Cmd", {"sh"}}, {"Env", {"A=image", "B=image", "C=image", "PATH=/img/bin"}}};
  RunOptions o;
  o.hostenv = true;
  o.file_env = {"B=file", "C=file"};
  o.env = {"C=cli", "FROM_HOST", "NOT_ON_HOST"};
  HostContext h{{"A=host", "FROM_HOST=yes", "HOME=/home/me"}, "/home/me", 1000, 1000};
  ContainerSpec s = build(config, o, h);
  EXPECT_EQ(env_value(s, "A"), "host");
  EXPECT_EQ(env_value(s, "B"), "file");
  EXPECT_EQ(env_value(s, "C"), "cli");
  EXPECT_EQ(env_value(s, "FROM_HOST"), "yes");
  EXPECT_EQ(env_value(s, "NOT_ON_HOST"), "<unset>");
  EXPECT_EQ(env_value(s, "PATH"), "/img/bin");
  EXPECT_EQ(env_value(s, "HOME"), "/home/me");  // --hostenv brought it

  ContainerSpec plain = build({{"Cmd", {"sh"}}}, RunOptions{}, h);
  EXPECT_EQ(env_value(plain, "PATH"),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(env_value(plain, "HOME"), "/root");
  EXPECT_EQ(env_value(plain, "A"), "<unset>");  // no host variables without --hostenv
}

TEST(BuildSpec, NoImageConfigUsesOnlyTheOptions) {
  json config = {{"Cmd", {"sh"}},
                 {"Entrypoint", {"/ep"}},
                 {"Env", {"A=image"}},
                 {"User", "app"},
                 {"WorkingDir", "/srv"}};
  RunOptions o;
  o.no_image_config = true;
  o.command = {"/bin/true"};
  ContainerSpec s = build(config, o);
  EXPECT_EQ(s.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(env_value(s, "A"), "<unset>");
  EXPECT_EQ(s.uid, 0u);
  EXPECT_EQ(s.cwd, "/");
  RunOptions bare;
  bare.no_image_config = true;
  auto none = build_spec(config, "/r", bare, {}, "", "");
  ASSERT_FALSE(none.ok());  // the image's Cmd is not used either
  EXPECT_EQ(none.error().message(),
            "run command: no command specified: the image has no Cmd or Entrypoint");
}

TEST(BuildSpec, UserWorkdirHostnameAndFlags) {
  json config = {{"Cmd", {"sh"}}, {"User", "app"}, {"WorkingDir", "/srv"}};
  ContainerSpec s = build(config, RunOptions{});
  EXPECT_EQ(s.uid, 1234u);
  EXPECT_EQ(s.gid, 1235u);
  EXPECT_EQ(s.user_name, "app");
  EXPECT_EQ(env_value(s, "HOME"), "/home/app");
  EXPECT_EQ(s.cwd, "/srv");

  RunOptions o;
  o.user = "0:0";
  o.workdir = "/tmp";
  o.hostname = "box";
  o.interactive = o.tty = o.pid_namespace = o.host_dev = true;
  s = build(config, o);
  EXPECT_EQ(s.uid, 0u);
  EXPECT_EQ(s.cwd, "/tmp");
  EXPECT_EQ(s.hostname, "box");
  EXPECT_EQ(env_value(s, "HOSTNAME"), "box");
  EXPECT_TRUE(s.stdin_open && s.tty && s.pid_namespace && s.host_dev);

  o.workdir = "relative";
  auto bad = build_spec(config, "/r", o, {}, kPasswd, kGroup);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "workdir relative: the working directory must be an absolute path");
}

TEST(BuildSpec, VolumesAndBindHome) {
  RunOptions o;
  o.volumes = {"/data:/data:ro", "/scratch:/scratch"};
  o.bind_home = true;
  HostContext h{{}, "/home/me", 1000, 1000};
  ContainerSpec s = build({{"Cmd", {"sh"}}}, o, h);
  ASSERT_EQ(s.volumes.size(), 3u);
  EXPECT_TRUE(s.volumes[0].read_only);
  EXPECT_EQ(s.volumes[1].container, "/scratch");
  EXPECT_EQ(s.volumes[2].host, "/home/me");
  EXPECT_EQ(s.volumes[2].container, "/home/me");
  EXPECT_EQ(env_value(s, "HOME"), "/home/me");

  o.volumes = {"nope"};
  EXPECT_FALSE(build_spec({{"Cmd", {"sh"}}}, "/r", o, h, "", "").ok());
}

}  // namespace
}  // namespace berth

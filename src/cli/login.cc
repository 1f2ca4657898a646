// berth login [-u USER] [-p PASS | --password-stdin] REGISTRY, berth logout REGISTRY
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/context.h"
#include "core/log.h"
#include "image/reference.h"
#include "site/policy.h"

namespace berth::cli {
namespace {

/// Reads one line from the terminal without echo (or from a pipe as is).
std::string read_secret(const char* prompt) {
  std::string line;
  if (::isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "%s", prompt);
    struct termios saved, quiet;
    bool echo_off = ::tcgetattr(STDIN_FILENO, &saved) == 0;
    if (echo_off) {
      quiet = saved;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    std::getline(std::cin, line);
    if (echo_off) ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    std::fprintf(stderr, "\n");
  } else {
    std::getline(std::cin, line);
  }
  return line;
}

/// Accepts "host[:port]" and also "https://host[:port]/..." as Docker does.
std::string registry_arg(std::string s) {
  for (const char* scheme : {"https://", "http://"})
    if (s.rfind(scheme, 0) == 0) s = s.substr(std::string(scheme).size());
  if (auto slash = s.find('/'); slash != std::string::npos) s = s.substr(0, slash);
  if (s == "index.docker.io" || s == "registry-1.docker.io") s = "docker.io";
  return s;
}

}  // namespace

Action setup_login(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string registry = "docker.io", user, password;
    bool password_stdin = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("REGISTRY", o->registry, "Registry host[:port] (default docker.io)");
  app.add_option("-u,--username", o->user, "User name");
  app.add_option("-p,--password", o->password, "Password (prefer --password-stdin)");
  app.add_flag("--password-stdin", o->password_stdin, "Read the password from standard input");
  return [o, &g]() -> Status {
    std::string registry = registry_arg(o->registry);
    // Before asking for a password: credentials for a registry the policy refuses are no use.
    RegistryOptions ropts =
        BERTH_TRY(registry_options_for(g, registry).with_context("login " + registry));
    if (o->password_stdin && !o->password.empty())
      return make_error("login", registry, "--password and --password-stdin are exclusive");
    if (o->user.empty()) {
      std::fprintf(stderr, "Username: ");
      std::getline(std::cin, o->user);
    }
    if (o->password_stdin) {
      std::getline(std::cin, o->password);
    } else if (o->password.empty()) {
      o->password = read_secret("Password: ");
    }
    if (o->user.empty() || o->password.empty())
      return make_error("login", registry, "a user name and a password are required");
    Credentials c{o->user, o->password, ""};
    RegistryClient client(registry, ropts, c);
    bool verified = true;
    if (Status st = client.check_login(); !st.ok()) {
      // A registry the site mirrors may be out of reach from here (docker.io behind a site's
      // pull-through cache): the login is kept, unverified, as udocker keeps it; a wrong
      // password is still refused wherever the registry answers.
      const SiteConfig& site = BERTH_TRY(g.site);
      std::vector<Mirror> mirrors = mirrors_for(site, registry);
      if (st.error().code != ErrorCode::kNetwork || mirrors.empty())
        return std::move(st).error().with_context("login " + registry);
      log::warn(
          "login {}: could not verify the credentials: {} is unreachable ({}); stored "
          "for pulls through the mirror {}",
          registry, registry, st.error().detail, mirrors.front().host);
      verified = false;
    }
    CredentialStore creds = BERTH_TRY(CredentialStore::load());
    BERTH_CHECK(creds.save(registry, c));
    if (verified) std::printf("Login Succeeded\n");
    return {};
  };
}

Action setup_logout(CLI::App& app, const GlobalOptions&) {
  struct Opts {
    std::string registry = "docker.io", user;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("REGISTRY", o->registry, "Registry host[:port] (default docker.io)");
  app.add_option("-u,--username", o->user, "Remove only this user's login (default: every one)");
  return [o]() -> Status {
    std::string r = registry_arg(o->registry);
    CredentialStore creds = BERTH_TRY(CredentialStore::load());
    if (!o->user.empty()) {
      if (!BERTH_TRY(creds.erase_user(r, o->user)))
        return make_error("logout", r, "user '" + o->user + "' is not logged in");
      std::printf("Removed login credentials of %s for %s\n", o->user.c_str(), r.c_str());
      return {};
    }
    bool erased = BERTH_TRY(creds.erase(r));
    if (!erased) return make_error("logout", r, "not logged in");
    std::printf("Removed login credentials for %s\n", r.c_str());
    return {};
  };
}

}  // namespace berth::cli

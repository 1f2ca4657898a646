// berth import, load, save, export: images and containers to and from tar archives.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/fs.h"
#include "image/import.h"
#include "image/load.h"
#include "image/save.h"
#include "image/tar_writer.h"
#include "runtime/link_form.h"
#include "runtime/subids.h"

namespace berth::cli {
namespace {

/// The input an archive is read from: a file, or stdin for "-".
struct Input {
  UniqueFd owned;
  int fd = 0;
  std::string what;  ///< the file's path, or "stdin"
};

Result<Input> open_input(const std::string& path) {
  Input in;
  if (path == "-") {
    if (::isatty(0))
      return make_error("read", "stdin", "refusing to read an archive from a terminal")
          .with_hint("give a file, or pipe the archive in");
    in.what = "stdin";
    return in;
  }
  in.owned = BERTH_TRY(open_file(path, O_RDONLY));
  in.fd = in.owned.get();
  in.what = path;
  return in;
}

/// Writes an archive to `path` ("" or "-": stdout). A file is written beside under a
/// temporary name and renamed when whole, so a failed write leaves no partial archive.
Status write_output(const std::string& path, Op op,
                    const std::function<Status(int fd, const std::string& what)>& write) {
  if (path.empty() || path == "-") {
    if (::isatty(1))
      return make_error(op, "stdout", "refusing to write an archive to a terminal")
          .with_hint("use -o FILE, or redirect the output");
    return write(1, "stdout");
  }
  std::string tmp = path + ".berth-tmp-" + std::to_string(::getpid());
  Status st = [&]() -> Status {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return sys_error("create", path);  // the user's name, not the temporary
    BERTH_CHECK(write(fd.get(), path));
    if (::fsync(fd.get()) != 0) return sys_error("fsync", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return sys_error("rename", tmp + " -> " + path);
    return {};
  }();
  if (!st.ok()) (void)::unlink(tmp.c_str());  // best effort: the write's error is the one to report
  return st;
}

std::string familiar(const std::string& name) {
  auto ref = parse_reference(name);
  return ref.ok() ? ref->familiar() : name;
}

}  // namespace

Action setup_import(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string file, name, platform;
    ImportOptions import;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("FILE", o->file, "Root filesystem tarball (plain, gzip or zstd), or - for stdin")
      ->required();
  app.add_option("REPOSITORY", o->name, "Name for the image: REPO[:TAG]")->required();
  app.add_option("-c,--change", o->import.changes,
                 "Dockerfile instruction for the config: ENV, CMD, ENTRYPOINT, WORKDIR, USER, ...")
      ->allow_extra_args(false);
  app.add_option("-m,--message", o->import.message, "Comment for the image's history");
  app.add_option("--platform", o->platform, "Platform the image declares (default: this host's)");
  return [o, &g]() -> Status {
    Reference ref = BERTH_TRY(parse_reference(o->name).with_context("import " + o->file));
    if (!ref.digest.empty())
      return make_error("import", o->name, "the name cannot carry a digest")
          .with_hint("use REPO[:TAG]");
    o->import.platform =
        o->platform.empty() ? host_platform() : BERTH_TRY(parse_platform(o->platform));
    Store store = BERTH_TRY(open_store(g));
    Input in = BERTH_TRY(open_input(o->file));
    ImageRecord rec = BERTH_TRY(import_rootfs(store, in.fd, in.what, ref, o->import));
    std::printf("%s\n", rec.config_digest.c_str());
    return {};
  };
}

Action setup_load(CLI::App& app, const GlobalOptions& g) {
  auto input = std::make_shared<std::string>("-");
  app.add_option("-i,--input", *input,
                 "Archive to read (docker save or OCI layout, a tar or a directory), - for stdin");
  return [input, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    struct stat st;
    std::vector<ImageRecord> recs;
    if (*input != "-" && ::stat(input->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      recs = BERTH_TRY(load_directory(store, *input));  // skopeo's oci:DIR, an unpacked save
    } else {
      Input in = BERTH_TRY(open_input(*input));
      recs = BERTH_TRY(load_archive(store, in.fd, in.what));
    }
    for (const ImageRecord& r : recs) std::printf("Loaded image: %s\n", familiar(r.name).c_str());
    return {};
  };
}

Action setup_save(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string output;
    std::vector<std::string> images;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("-o,--output", o->output, "Write to this file instead of stdout");
  app.add_option("IMAGE", o->images, "Images to save")->required();
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    // Before the records are read: no rmi or gc deletes a blob of theirs until all is written.
    FileLock pinned = BERTH_TRY(store.pin());
    std::vector<ImageRecord> recs;
    for (const std::string& name : o->images) {
      ImageRecord rec = BERTH_TRY(store.find_image(name));
      bool seen = false;
      for (const ImageRecord& r : recs) seen = seen || r.name == rec.name;
      if (!seen) recs.push_back(rec);
    }
    return write_output(o->output, "save", [&](int fd, const std::string& what) {
      return save_archive(store, recs, fd, what);
    });
  };
}

Action setup_export(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string output, container;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("-o,--output", o->output, "Write to this file instead of stdout");
  app.add_option("CONTAINER", o->container, "Container name or ID")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->container));
    // The image's symlink form, whatever engine ran the container last.
    FileLock held = BERTH_TRY(lock_canonical(cs, c, "export"));
    // Where the user has subordinate IDs, the walk runs inside their namespace: files of other
    // IDs (apt's _apt, 0700) are readable there, and each file shows its ID inside.
    return run_mapped([&] {
      return write_output(o->output, "export", [&](int fd, const std::string& what) -> Status {
        TarWriter w = BERTH_TRY(TarWriter::open(fd, what));
        // Rootless, the files are ours on the host and root's inside: write what the container
        // sees, as docker export does (as root, host and container IDs are the same).
        if (::geteuid() != 0) w.set_owner_view(::geteuid(), ::getegid());
        BERTH_CHECK(w.add_tree(cs.rootfs(c)).with_context("export " + o->container));
        return w.finish();
      });
    });
  };
}

}  // namespace berth::cli

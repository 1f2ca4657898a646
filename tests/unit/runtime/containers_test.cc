#include "runtime/containers.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/sha256.h"
#include "test_util.h"

namespace berth {
namespace {

/// An uncompressed tar holding one file.
std::string tar_with_file(const std::string& name, const std::string& data) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* ctx, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(ctx)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  archive_write_header(a, e);
  archive_write_data(a, data.data(), data.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

class ContainersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = tmp_.path;
    auto s = Store::open(home_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_.emplace(std::move(*s));
    std::string layer = tar_with_file("etc/motd", "hello\n");
    std::string config = R"({"architecture":"amd64","os":"linux","config":{"Cmd":["/bin/sh"]},)"
                         R"("rootfs":{"type":"layers","diff_ids":[")" +
                         sha256_digest(layer) + R"("]}})";
    image_.name = "127.0.0.1:5000/test/app:1";
    image_.config_digest = sha256_digest(config);
    image_.layers = {sha256_digest(layer)};
    ASSERT_TRUE(store_->put_blob(image_.config_digest, config).ok());
    ASSERT_TRUE(store_->put_blob(image_.layers[0], layer).ok());
    auto cs = ContainerStore::open(home_);
    ASSERT_TRUE(cs.ok());
    cs_.emplace(std::move(*cs));
  }
  TempDir tmp_{"containers"};
  std::string home_;
  std::optional<Store> store_;
  std::optional<ContainerStore> cs_;
  ImageRecord image_;
};

TEST_F(ContainersTest, CreateUnpacksAndRecords) {
  auto c = cs_->create(*store_, image_, "web");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->id.size(), 64u);
  EXPECT_EQ(c->names, (std::vector<std::string>{"web"}));
  EXPECT_EQ(c->image_config["Cmd"][0], "/bin/sh");
  EXPECT_EQ(*read_file(cs_->rootfs(*c) + "/etc/motd"), "hello\n");

  auto list = cs_->list();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, c->id);
  EXPECT_FALSE((*list)[0].running);
  EXPECT_FALSE((*list)[0].last_exit.has_value());
}

TEST_F(ContainersTest, FindByNameIdAndPrefix) {
  auto c = *cs_->create(*store_, image_, "web");
  EXPECT_EQ(cs_->find("web")->id, c.id);
  EXPECT_EQ(cs_->find(c.id)->id, c.id);
  EXPECT_EQ(cs_->find(c.id.substr(0, 6))->id, c.id);
  EXPECT_EQ(cs_->find("nope").error().message(), "find container nope: no such container");
  EXPECT_FALSE(cs_->find("../containers").ok());
}

TEST_F(ContainersTest, NamesAreUniqueAndValidated) {
  auto c = *cs_->create(*store_, image_, "web");
  auto clash = cs_->create(*store_, image_, "web");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message(),
            "create web: the container name \"web\" is already in use by "
            "container " +
                c.id);
  EXPECT_EQ(cs_->list()->size(), 1u);  // the clash left nothing behind
  for (const char* bad : {"-x", "a/b", "sp ace", ".hidden"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(cs_->create(*store_, image_, bad).ok());
  }
  ASSERT_TRUE(cs_->add_name(c, "second").ok());
  EXPECT_EQ(cs_->find("second")->names, (std::vector<std::string>{"second", "web"}));
  // The record alone (berth run's lookup): only the name it was found by, no scan of names/.
  auto quick = *cs_->find("web", ContainerStore::Detail::kRecord);
  EXPECT_EQ(quick.id, c.id);
  EXPECT_EQ(quick.names, (std::vector<std::string>{"web"}));
  EXPECT_TRUE(cs_->find(c.id, ContainerStore::Detail::kRecord)->names.empty());
  ASSERT_TRUE(cs_->remove_name("web").ok());
  EXPECT_FALSE(cs_->find("web").ok());
  EXPECT_EQ(cs_->remove_name("web").error().message(), "rmname web: no such container name");
}

TEST_F(ContainersTest, RecordRunAndRemove) {
  auto c = *cs_->create(*store_, image_, "");
  ASSERT_TRUE(cs_->record_run(c, {"/bin/sh", "-c", "exit 3"}, std::nullopt).ok());
  ASSERT_TRUE(cs_->record_run(c, {}, 3).ok());
  auto again = *cs_->find(c.id);
  EXPECT_EQ(again.last_command, (std::vector<std::string>{"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(again.last_exit, 3);
  ASSERT_TRUE(cs_->remove(again, false).ok());
  EXPECT_TRUE(cs_->list()->empty());
  EXPECT_FALSE(path_exists(cs_->dir(again)));
}

TEST_F(ContainersTest, ListSkipsAContainerRemovedWhileItReads) {
  auto kept = *cs_->create(*store_, image_, "kept");
  auto going = *cs_->create(*store_, image_, "going");
  // What a listing meets when a removal runs beside it: the folder listed, its record gone.
  ASSERT_EQ(::unlink((cs_->dir(going) + "/container.json").c_str()), 0);
  auto list = cs_->list();
  ASSERT_TRUE(list.ok()) << list.error().message();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, kept.id);
  // A record that is there but unreadable is still an error: only absence is skipped.
  ASSERT_TRUE(write_file_atomic(cs_->dir(kept) + "/container.json", "{").ok());
  EXPECT_FALSE(cs_->list().ok());
}

TEST_F(ContainersTest, TheEngineIsParsedWhenReadAndWrittenBackAsSpelled) {
  auto c = *cs_->create(*store_, image_, "eng");
  EXPECT_FALSE(cs_->find("eng")->engine);  // none recorded: the default's
  ASSERT_TRUE(cs_->set_udocker_mode(c, *parse_engine("singularity"), "S1").ok());
  auto again = *cs_->find("eng");
  ASSERT_TRUE(again.engine);
  EXPECT_EQ(again.engine->row, find_engine("apptainer"));
  std::string path = cs_->dir(c) + "/container.json";
  std::string text = *read_file(path);
  EXPECT_NE(text.find("\"engine\": \"singularity\""), std::string::npos) << text;  // as given
  ASSERT_TRUE(cs_->set_engine(c, std::nullopt).ok());
  EXPECT_EQ(read_file(path)->find("\"engine\""), std::string::npos);
  // A word this berth does not know is refused, naming the file and the word.
  std::string bad = text;
  bad.replace(bad.find("singularity"), std::string("singularity").size(), "docker");
  write_text(path, bad);
  auto refused = cs_->find("eng");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            "read container " + path + ": engine docker: unknown engine");
}

TEST_F(ContainersTest, RunningContainerIsLockedAndNotRemoved) {
  auto c = *cs_->create(*store_, image_, "busy");
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // another process runs the container: holds its lock until told to stop
    auto lock = cs_->lock_for_run(c);
    char b = lock.ok() ? 'y' : 'n';
    (void)!write(ready[1], &b, 1);
    (void)!read(done[0], &b, 1);
    _exit(0);
  }
  char b = 0;
  ASSERT_EQ(read(ready[0], &b, 1), 1);
  ASSERT_EQ(b, 'y');
  EXPECT_TRUE(cs_->find("busy")->running);
  auto second = cs_->lock_for_run(c);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().detail, "container " + c.short_id() + " is already running");
  auto rm = cs_->remove(c, false);
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().detail, "container " + c.short_id() + " is running");
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status;
  waitpid(pid, &status, 0);
  EXPECT_FALSE(cs_->find("busy")->running);
  EXPECT_TRUE(cs_->remove(c, false).ok());
}

TEST_F(ContainersTest, RunLockHoldsThePidAtAFixedWidth) {
  auto c = *cs_->create(*store_, image_, "pidfile");
  std::string path = cs_->dir(c) + "/run.lock";
  // What an older berth may have left: longer than a pid at the fixed width.
  ASSERT_TRUE(write_file_atomic(path, "12345678901234567890\n").ok());
  {
    auto lock = cs_->lock_for_run(c);
    ASSERT_TRUE(lock.ok());
    char want[16];
    std::snprintf(want, sizeof want, "%010d\n", static_cast<int>(getpid()));
    EXPECT_EQ(*read_file(path), want);
    EXPECT_EQ(std::atol(read_file(path)->c_str()),
              static_cast<long>(getpid()));  // as stop() reads it
  }
  auto again = cs_->lock_for_run(c);  // over the last run's pid: same length, no truncation
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(read_file(path)->size(), 11u);
}

TEST_F(ContainersTest, MissingLayerIsAClearError) {
  image_.layers.push_back(sha256_digest("not stored"));
  auto c = cs_->create(*store_, image_, "");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "create 127.0.0.1:5000/test/app:1: layer " + image_.layers[1] +
                                     " is missing from the store");
  EXPECT_TRUE(cs_->list()->empty());
}

TEST_F(ContainersTest, RenameReplacesNamesAndRefusesATakenOne) {
  auto c = *cs_->create(*store_, image_, "web");
  ASSERT_TRUE(cs_->add_name(c, "alias").ok());
  auto other = *cs_->create(*store_, image_, "db");
  c = *cs_->find("web");
  ASSERT_TRUE(cs_->rename(c, "front").ok());
  EXPECT_EQ(cs_->find("front")->names, (std::vector<std::string>{"front"}));
  EXPECT_FALSE(cs_->find("web").ok());
  auto clash = cs_->rename(*cs_->find("front"), "db");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message(),
            "name db: the container name \"db\" is already in use by container " + other.id);
  EXPECT_EQ(cs_->find("front")->names, (std::vector<std::string>{"front"}));  // unchanged
  EXPECT_EQ(cs_->rename(*cs_->find("front"), "front").error().detail,
            "the container is already named \"front\"");
  EXPECT_FALSE(cs_->rename(*cs_->find("front"), "bad/name").ok());
}

TEST_F(ContainersTest, CloneCopiesRootfsUnderANewId) {
  auto c = *cs_->create(*store_, image_, "web");
  ASSERT_TRUE(write_file_atomic(cs_->rootfs(c) + "/etc/changed", "local edit\n").ok());
  ASSERT_EQ(
      ::link((cs_->rootfs(c) + "/etc/changed").c_str(), (cs_->rootfs(c) + "/etc/linked").c_str()),
      0);
  ASSERT_EQ(::symlink("motd", (cs_->rootfs(c) + "/etc/motd.link").c_str()), 0);
  ASSERT_TRUE(write_file_atomic(cs_->rootfs(c) + "/etc/shadow", "secret\n", 0).ok());
  auto copy = cs_->clone(c, "copy");
  ASSERT_TRUE(copy.ok()) << copy.error().message();
  EXPECT_NE(copy->id, c.id);
  EXPECT_EQ(copy->names, (std::vector<std::string>{"copy"}));
  EXPECT_EQ(copy->image, c.image);
  EXPECT_EQ(*read_file(cs_->rootfs(*copy) + "/etc/changed"), "local edit\n");
  struct stat a, b;
  ASSERT_EQ(::stat((cs_->rootfs(*copy) + "/etc/changed").c_str(), &a), 0);
  ASSERT_EQ(::stat((cs_->rootfs(*copy) + "/etc/linked").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);  // hard links stay links
  char target[16] = {};
  ASSERT_GT(::readlink((cs_->rootfs(*copy) + "/etc/motd.link").c_str(), target, sizeof target), 0);
  EXPECT_STREQ(target, "motd");
  struct stat shadow;  // unreadable by its mode, copied all the same, mode kept
  ASSERT_EQ(::stat((cs_->rootfs(*copy) + "/etc/shadow").c_str(), &shadow), 0);
  EXPECT_EQ(shadow.st_mode & 07777, 0u);
  ASSERT_EQ(::stat((cs_->rootfs(c) + "/etc/shadow").c_str(), &shadow), 0);
  EXPECT_EQ(shadow.st_mode & 07777, 0u);
  EXPECT_EQ(cs_->list()->size(), 2u);
  EXPECT_EQ(cs_->clone(c, "web").error().detail,
            "the container name \"web\" is already in use by container " + c.id);
  EXPECT_EQ(cs_->list()->size(), 2u);
}

TEST_F(ContainersTest, ProtectedContainerIsNotRemoved) {
  auto c = *cs_->create(*store_, image_, "keep");
  ASSERT_TRUE(cs_->set_protected(c, true).ok());
  auto found = *cs_->find("keep");
  EXPECT_TRUE(found.is_protected);
  auto rm = cs_->remove(found, true);
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().message(), "rm keep: container " + c.short_id() + " is protected");
  EXPECT_EQ(rm.error().hint, "run 'berth unprotect keep' first");
  ASSERT_TRUE(cs_->record_run(found, {"/bin/true"}, 0).ok());
  EXPECT_TRUE(cs_->find("keep")->is_protected);  // a run keeps the mark
  ASSERT_TRUE(cs_->set_protected(found, false).ok());
  EXPECT_TRUE(cs_->remove(*cs_->find("keep"), false).ok());
}

TEST_F(ContainersTest, ConcurrentUpdatesOfTheRecordAreNotLost) {
  // `berth protect` while a run records its end: both read container.json, change their field
  // and write it back; without the container's lock the second write drops the first change.
  auto c = *cs_->create(*store_, image_, "");
  int lost = 0;
  for (int i = 0; i < 100; ++i) {
    std::atomic<int> ready{0};
    auto start_together = [&ready] {
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();
    };
    Status protect, record;
    std::thread a([&] {
      start_together();
      protect = cs_->set_protected(c, i % 2 == 0);
    });
    std::thread b([&] {
      start_together();
      record = cs_->record_run(c, {"/bin/true", std::to_string(i)}, i);
    });
    a.join();
    b.join();
    ASSERT_TRUE(protect.ok()) << protect.error().message();
    ASSERT_TRUE(record.ok()) << record.error().message();
    auto now = *cs_->find(c.id);
    if (now.is_protected != (i % 2 == 0) || now.last_exit != i) ++lost;
  }
  EXPECT_EQ(lost, 0);
}

}  // namespace
}  // namespace berth

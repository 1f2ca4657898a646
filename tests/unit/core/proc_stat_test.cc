#include "core/proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string>

namespace berth {
namespace {

// The first 22 fields of a stat line: PID (COMM) STATE PPID, then 17 fields, then STARTTIME.
std::string stat_line(const std::string& comm, char state, long ppid, unsigned long start) {
  return "4321 (" + comm + ") " + state + " " + std::to_string(ppid) +
         " 4321 4321 0 -1 4194560 102 0 0 0 3 1 0 0 20 0 1 0 " + std::to_string(start) +
         " 8601600 235 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
}

// Expects `text` to parse into exactly these fields.
void expect_fields(const std::string& text, char state, int64_t ppid, uint64_t start) {
  SCOPED_TRACE(text);
  std::optional<ProcStat> st = parse_proc_stat(text);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, state);
  EXPECT_EQ(st->ppid, ppid);
  EXPECT_EQ(st->start_time, start);
  EXPECT_EQ(st->gone(), state == 'Z' || state == 'X');
}

TEST(ProcStat, NormalLine) {
  expect_fields(stat_line("bash", 'S', 977, 8812345), 'S', 977, 8812345);
}

TEST(ProcStat, TerminalAndCpuTimes) {
  // `berth top`'s fields: tty_nr (7), utime (14), stime (15).
  auto st = parse_proc_stat(stat_line("sh", 'S', 1, 99));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->tty_nr, 0);
  EXPECT_EQ(st->utime, 3u);
  EXPECT_EQ(st->stime, 1u);
  st = parse_proc_stat("7 (x) R 1 7 7 34817 -1 0 0 0 0 0 250 50 0 0 20 0 1 0 12");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->tty_nr, 34817);  // pts/1: major 136, minor 1
  EXPECT_EQ(st->utime + st->stime, 300u);
  EXPECT_EQ(st->start_time, 12u);
}

TEST(ProcStat, CommWithSpacesAndParentheses) {
  // Only the last ')' ends the name; a name that looks like fields must not shift them.
  expect_fields(stat_line("a) (b c) Z 9", 'R', 1, 4242), 'R', 1, 4242);
  expect_fields("1234 (a) (b c)) D 55 1234", 'D', 55, 0);
}

TEST(ProcStat, ZombieAndDeadAreGone) {
  // A zombie keeps its fields until reaped: what it means is for the callers to say.
  expect_fields(stat_line("sh", 'Z', 300, 77), 'Z', 300, 77);
  expect_fields(stat_line("sh", 'X', 300, 77), 'X', 300, 77);
}

TEST(ProcStat, TruncatedLineKeepsItsState) {
  expect_fields("1 (x) S", 'S', 0, 0);
  expect_fields("1 (x) T 8\n", 'T', 8, 0);
}

TEST(ProcStat, GarbageHasNoState) {
  for (const char* text : {"", "hello world", "1 (x)", "1 (x)   \n", "1 (x) Sleeping 1"})
    EXPECT_FALSE(parse_proc_stat(text)) << text;
}

TEST(ProcStat, GarbledNumbersReadAsZero) {
  expect_fields("1 (x) S 12ab 1", 'S', 0, 0);
  expect_fields("1 (x) S -5", 'S', 0, 0);
  // A start time past 2^64 is no number of ticks.
  std::string big = stat_line("x", 'S', 2, 5);
  big.replace(big.find(" 5 8601600"), 2, " 99999999999999999999");
  expect_fields(big, 'S', 2, 0);
}

TEST(ProcStat, ReadsThisProcess) {
  std::optional<ProcStat> st = read_proc_stat(::getpid());
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'R');  // reading its own stat, it runs
  EXPECT_EQ(st->ppid, ::getppid());
  EXPECT_GT(st->start_time, 0U);
}

TEST(ProcStat, ReadingAMissingProcessGivesNothing) {
  // Above pid_max (at most 2^22): no such process.
  EXPECT_FALSE(read_proc_stat(static_cast<pid_t>(1 << 23)));
}

TEST(ProcStat, WalksTheProcessesAndStopsWhenAsked) {
  int seen = 0;
  bool found_self = false;
  ASSERT_TRUE(for_each_pid([&](pid_t pid) {
    ++seen;
    EXPECT_GT(pid, 0);
    found_self = pid == ::getpid();
    return found_self;
  }));
  EXPECT_TRUE(found_self);
  int calls = 0;
  ASSERT_TRUE(for_each_pid([&](pid_t) { return ++calls == 1; }));
  EXPECT_EQ(calls, 1);  // stopped at the first
  EXPECT_GE(seen, 1);
}

}  // namespace
}  // namespace berth

#include "core/proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

TEST(ProcStat, NormalLine) {
  std::optional<ProcStat> st = parse_proc_stat(stat_line("bash", 'S', 977, 8812345));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 977);
  EXPECT_EQ(st->start_time, 8812345U);
  EXPECT_FALSE(st->gone());
}

TEST(ProcStat, CommWithSpacesAndParentheses) {
  // Only the last ')' ends the name; a name that looks like fields must not shift them.
  std::optional<ProcStat> st = parse_proc_stat(stat_line("a) (b c) Z 9", 'R', 1, 4242));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'R');
  EXPECT_EQ(st->ppid, 1);
  EXPECT_EQ(st->start_time, 4242U);

  st = parse_proc_stat("1234 (a) (b c)) D 55 1234");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'D');
  EXPECT_EQ(st->ppid, 55);
  EXPECT_EQ(st->start_time, 0U);
}

TEST(ProcStat, ZombieAndDeadAreGone) {
  std::optional<ProcStat> z = parse_proc_stat(stat_line("sh", 'Z', 300, 77));
  ASSERT_TRUE(z);
  EXPECT_EQ(z->state, 'Z');
  EXPECT_TRUE(z->gone());
  EXPECT_EQ(z->ppid, 300);  // a zombie keeps its fields until reaped: callers decide
  EXPECT_EQ(z->start_time, 77U);
  std::optional<ProcStat> x = parse_proc_stat(stat_line("sh", 'X', 300, 77));
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->gone());
}

TEST(ProcStat, TruncatedLineKeepsItsState) {
  std::optional<ProcStat> st = parse_proc_stat("1 (x) S");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->ppid, 0);
  EXPECT_EQ(st->start_time, 0U);

  st = parse_proc_stat("1 (x) T 8\n");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, 'T');
  EXPECT_EQ(st->ppid, 8);
}

TEST(ProcStat, GarbageHasNoState) {
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("hello world"));
  EXPECT_FALSE(parse_proc_stat("1 (x)"));
  EXPECT_FALSE(parse_proc_stat("1 (x)   \n"));
  EXPECT_FALSE(parse_proc_stat("1 (x) Sleeping 1"));
}

TEST(ProcStat, GarbledNumbersReadAsZero) {
  std::optional<ProcStat> st = parse_proc_stat("1 (x) S 12ab 1");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ppid, 0);
  st = parse_proc_stat("1 (x) S -5");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ppid, 0);
  // A start time past 2^64 is no number of ticks.
  std::string big = stat_line("x", 'S', 2, 5);
  big.replace(big.find(" 5 8601600"), 2, " 99999999999999999999");
  st = parse_proc_stat(big);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ppid, 2);
  EXPECT_EQ(st->start_time, 0U);
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

}  // namespace
}  // namespace berth

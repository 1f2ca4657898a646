// The detached run's log format (runtime/monitor.h): records read back stream by stream,
// whatever the pieces the log is read in; older raw logs; damage and a cut-short end.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/monitor.h"

namespace berth {
namespace {

std::string record(uint8_t stream, const std::string& data, int64_t time_ns = 42) {
  unsigned char header[16] = {};
  header[0] = stream;
  auto length = static_cast<uint32_t>(data.size());
  std::memcpy(header + 4, &length, 4);
  std::memcpy(header + 8, &time_ns, 8);
  return std::string(reinterpret_cast<const char*>(header), sizeof header) + data;
}

struct Seen {
  std::string out, err;
  std::vector<int64_t> times;
};

Seen read_in_pieces(const std::string& log, size_t piece) {
  Seen seen;
  LogReader reader;
  LogSink sink = [&](int stream, int64_t t, std::string_view data) {
    (stream == 2 ? seen.err : seen.out).append(data);
    seen.times.push_back(t);
  };
  for (size_t at = 0; at < log.size(); at += piece)
    reader.feed(std::string_view(log).substr(at, piece), false, sink);
  reader.feed({}, true, sink);
  return seen;
}

TEST(LogReader, RecordsGoToTheirStreamsWhateverThePieces) {
  std::string log = "berth-log 1\n" + record(1, "out one\n") + record(2, "err\n", 7) +
                    record(1, "out two\n") + record(2, "");
  for (size_t piece : {1, 3, 16, 17, 1000}) {
    Seen s = read_in_pieces(log, piece);
    EXPECT_EQ(s.out, "out one\nout two\n") << piece;
    EXPECT_EQ(s.err, "err\n") << piece;
  }
  EXPECT_EQ(read_in_pieces(log, 1000).times[1], 7);
}

TEST(LogReader, ARecordCutShortWaitsUnlessTheLogIsWhole) {
  std::string log = "berth-log 1\n" + record(1, "done\n") + record(2, "half of it");
  log.resize(log.size() - 3);
  LogReader reader;
  std::string out, err;
  LogSink sink = [&](int stream, int64_t, std::string_view d) {
    (stream == 2 ? err : out).append(d);
  };
  reader.feed(log, false, sink);
  EXPECT_EQ(out, "done\n");
  EXPECT_EQ(err, "");
  reader.feed({}, true, sink);  // the run is over: what there is, is shown
  EXPECT_EQ(err, "half of");
}

TEST(LogReader, AnOlderRawLogIsStdout) {
  Seen s = read_in_pieces("plain text\nfrom before\n", 4);
  EXPECT_EQ(s.out, "plain text\nfrom before\n");
  EXPECT_EQ(s.err, "");
  // Shorter than the first line and not it: raw too, once the log is whole.
  EXPECT_EQ(read_in_pieces("berth", 2).out, "berth");
}

TEST(LogReader, DamageShowsTheRestRawRatherThanLosingIt) {
  std::string bad = record(9, "xx");
  Seen s = read_in_pieces("berth-log 1\n" + record(1, "good\n") + bad, 5);
  EXPECT_EQ(s.out, "good\n" + bad);
}

}  // namespace
}  // namespace berth

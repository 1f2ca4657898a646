#include "image/chunk_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace berth {
namespace {

Chunk chunk_of(ChunkQueue& q, const std::string& text) {
  Chunk c = q.take_buffer(text.size());
  text.copy(c.bytes.data(), text.size());
  c.size = text.size();
  return c;
}

TEST(ChunkQueue, PassesChunksInOrderWithinItsBound) {
  constexpr size_t kBound = 64;
  ChunkQueue q(kBound);
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(q.push(chunk_of(q, "chunk " + std::to_string(i))));
    q.close();
  });
  std::string got;
  int n = 0;
  while (auto c = q.pop()) {
    EXPECT_LE(q.queued_bytes(), kBound);
    EXPECT_EQ(c->view(), "chunk " + std::to_string(n++));
    q.recycle(std::move(*c));
  }
  producer.join();
  EXPECT_EQ(n, 1000);
  EXPECT_FALSE(q.pop());  // still the end
}

TEST(ChunkQueue, AChunkOverTheBoundGoesThroughAlone) {
  ChunkQueue q(4);
  std::thread producer([&] {
    EXPECT_TRUE(q.push(chunk_of(q, "longer than four")));
    EXPECT_TRUE(q.push(chunk_of(q, "and another")));
    q.close();
  });
  auto a = q.pop();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->view(), "longer than four");
  auto b = q.pop();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->view(), "and another");
  EXPECT_FALSE(q.pop());
  producer.join();
}

TEST(ChunkQueue, CancelUnblocksTheProducerAndDropsWhatWaits) {
  ChunkQueue q(8);
  std::thread producer([&] {
    // Pushes until the consumer cancels: the bound holds it back until then.
    while (q.push(chunk_of(q, "12345678"))) {
    }
    EXPECT_FALSE(q.push(chunk_of(q, "late")));
  });
  auto first = q.pop();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->view(), "12345678");
  q.cancel();
  producer.join();
  EXPECT_EQ(q.queued_bytes(), 0u);
  EXPECT_FALSE(q.pop());
}

TEST(ChunkQueue, RecycledBuffersAreReused) {
  ChunkQueue q;
  ASSERT_TRUE(q.push(chunk_of(q, "abc")));
  q.close();
  auto c = q.pop();
  ASSERT_TRUE(c);
  const char* buffer = c->bytes.data();
  q.recycle(std::move(*c));
  Chunk again = q.take_buffer(3);
  EXPECT_EQ(again.bytes.data(), buffer);
  EXPECT_EQ(again.size, 0u);
  Chunk bigger = q.take_buffer(1024);  // none spare that large: a new one
  EXPECT_GE(bigger.bytes.size(), 1024u);
}

TEST(ChunkQueue, AnEmptyChunkIsNotQueued) {
  ChunkQueue q;
  EXPECT_TRUE(q.push(Chunk{}));
  q.close();
  EXPECT_FALSE(q.pop());
}

}  // namespace
}  // namespace berth

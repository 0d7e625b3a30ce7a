// Lines of memory that a kernel's driver asks for into L2 a few at a time, between its tiles (pump),
// or hands to its tiles to ask for among their own instructions (take): what the next block of
// rows will read that the hardware prefetchers do not see coming (the members' factor blocks, at
// one row per member each row's own). Spread over a block's tiles the fetches hide behind them;
// asked for all at once, they would stall the core on its outstanding-miss buffers with nothing
// to hide behind.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace eggroll::cpu {

class LineQueue {
 public:
  void clear() {
    ranges_.clear();
    next_ = 0;
  }
  // The lines of [p, p + bytes).
  void add(const void* p, std::int64_t bytes) {
    const char* c = static_cast<const char*>(p);
    const char* line = c - (reinterpret_cast<std::uintptr_t>(c) & 63);
    ranges_.emplace_back(line, c + bytes);
  }
  std::int64_t lines_left() const {
    std::int64_t n = 0;
    for (std::size_t k = next_; k < ranges_.size(); ++k) n += (ranges_[k].second - ranges_[k].first + 63) / 64;
    return n;
  }
  // Up to `lines` more lines' addresses into out, for a kernel to ask for among its own
  // instructions; returns how many.
  std::int64_t take(std::int64_t lines, const char** out) {
    std::int64_t n = 0;
    for (; n < lines && next_ < ranges_.size(); ++n) out[n] = next_line();
    return n;
  }
  // Asks for up to `lines` more lines into L2 (all that are left when lines < 0). Always inlined:
  // GCC 12 drops calls to functions whose only visible effects are prefetches.
  [[gnu::always_inline]] inline void pump(std::int64_t lines) {
    for (; next_ < ranges_.size() && lines != 0; --lines) __builtin_prefetch(next_line(), 0, 2);
  }

 private:
  // The first line not yet handed out (next_ < ranges_.size()).
  [[gnu::always_inline]] inline const char* next_line() {
    const char* line = ranges_[next_].first;
    ranges_[next_].first += 64;
    if (ranges_[next_].first >= ranges_[next_].second) ++next_;
    return line;
  }

  std::vector<std::pair<const char*, const char*>> ranges_;
  std::size_t next_ = 0;
};

}  // namespace eggroll::cpu

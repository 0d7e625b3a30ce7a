// eggroll::Error, the one exception type the library throws, and checking helpers.
// Messages say what was wrong, the value seen, what was expected and how to fix it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace eggroll {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from any streamable pieces: throw_error("es.rank = ", r, ": expected >= 1").
template <typename... Parts>
[[noreturn]] void throw_error(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

template <typename... Parts>
void check(bool condition, Parts&&... parts) {
  if (!condition) throw_error(std::forward<Parts>(parts)...);
}

}  // namespace eggroll

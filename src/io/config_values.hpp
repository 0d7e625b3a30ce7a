// Values of config keys (private to src/io): their types and limits, reading and checking them
// from TOML nodes, and writing them back as TOML text and in error messages.
#pragma once
#ifndef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 0  // link the shared libtomlplusplus, as its CMake target does
#define TOML_SHARED_LIB 1
#endif
#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "eggroll/core/error.hpp"

namespace eggroll::config_detail {

// Every value a key can hold: ConfigValue's alternatives (same order) plus lists of numbers.
using Value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                           std::vector<double>>;

struct Bound {
  double value;
  bool open = false;  // strict inequality
};
inline Bound ge(double v) { return {v, false}; }
inline Bound gt(double v) { return {v, true}; }
inline Bound le(double v) { return {v, false}; }
inline Bound lt(double v) { return {v, true}; }

struct Limits {
  std::optional<Bound> min = {};          // numbers, and each element of a list
  std::optional<Bound> max = {};
  std::vector<std::string> choices = {};  // strings
  std::size_t length = 0;                 // lists: exact length, 0 = any
  std::string note = {};                  // appended to "expected ..."
};

struct Field {
  std::string key;
  Value default_value;  // its alternative fixes the type
  Limits limits;
};

// Where a key came from, for messages: the file, or the override that set it.
struct Context {
  std::string source;
  std::map<std::string, std::string> overrides;  // "section.key" -> the override's text
  std::set<std::string> file_sections;           // sections present in the file itself

  std::string where(const std::string& section, const std::string& key) const {
    auto it = overrides.find(section + "." + key);
    return it == overrides.end() ? source : source + ": override '" + it->second + "'";
  }
  // Throws "<where>: section.key = value: what".
  [[noreturn]] void fail(const std::string& section, const std::string& key,
                         const std::string& value, const std::string& what) const {
    throw_error(where(section, key), ": ", section, ".", key, " = ", value, ": ", what);
  }
};

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
std::string trim(std::string_view s);
std::string quote(std::string_view s);          // a TOML basic string
std::string format_double(double x);           // shortest exact text, always a TOML float
std::string format_value(const Value& v);       // TOML text
std::string format_node(const toml::node& node);  // as the user wrote it, for messages
std::string format_key(const std::string& key);   // bare when it can be, else quoted

// The known name closest to `name`, if it is close enough to be a likely typo.
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& known);

std::string describe(const Field& f);  // "an integer >= 1", "one of a, b", ...
bool value_in_limits(const Value& v, const Limits& l);

// The node as a value of f's type within f's limits; otherwise throws naming key, value and
// what is allowed. Integers are accepted for numbers; every number must be finite.
Value read_value(const Context& ctx, const std::string& section, const Field& f, const toml::node& node);

// Throws for a key that `allowed` does not hold, suggesting the closest one.
[[noreturn]] void unknown_key(const Context& ctx, const std::string& section, const std::string& key,
                              const toml::node& node, const std::vector<std::string>& allowed,
                              const std::string& scope);

}  // namespace eggroll::config_detail

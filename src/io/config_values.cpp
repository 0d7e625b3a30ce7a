// Values of config keys: type and limit checks of TOML nodes, messages that say what is
// allowed, and TOML text for the resolved config.
#include "config_values.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace eggroll::config_detail {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// Shortest text that reads back to the same double; always a TOML float.
std::string format_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// A bound as people write it: 1 rather than 1.0.
std::string format_number(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e18)
    return std::to_string(static_cast<std::int64_t>(x));
  return format_double(x);
}

}  // namespace

std::string format_value(const Value& v) {
  return std::visit([](const auto& x) -> std::string {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
    else if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(x);
    else if constexpr (std::is_same_v<T, double>) return format_double(x);
    else if constexpr (std::is_same_v<T, std::string>) return quote(x);
    else {
      std::vector<std::string> parts;
      for (auto e : x) parts.push_back(format_value(Value(e)));
      return "[" + join(parts) + "]";
    }
  }, v);
}

// A TOML node as the user wrote it, for messages.
std::string format_node(const toml::node& node) {
  if (auto s = node.as_string()) return quote(s->get());
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) return format_double(f->get());
  if (auto b = node.as_boolean()) return b->get() ? "true" : "false";
  if (auto a = node.as_array()) {
    std::vector<std::string> parts;
    for (const toml::node& e : *a) parts.push_back(format_node(e));
    return "[" + join(parts) + "]";
  }
  if (node.is_table()) return "{...}";
  std::ostringstream os;
  if (auto d = node.as_date()) os << *d;
  else if (auto t = node.as_time()) os << *t;
  else if (auto dt = node.as_date_time()) os << *dt;
  return os.str();
}

std::string format_key(const std::string& key) {
  bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  return bare ? key : quote(key);
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// The known name closest to `name`, if it is close enough to be a likely typo (few edits,
// or one is a prefix of the other).
std::optional<std::string> closest(const std::string& name, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  std::size_t best_d = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const auto& k : known) {
    std::size_t d = edit_distance(name, k);
    bool prefix = std::min(name.size(), k.size()) >= 3 && (name.starts_with(k) || k.starts_with(name));
    if (prefix) d = std::min<std::size_t>(d, 1);  // "optimizer" for "optim"
    if (d < best_d && d < std::max(name.size(), k.size())) best = k, best_d = d;
  }
  return best;
}

// ---- field types, limits and reading -----------------------------------------------------

namespace {

std::string bounds_text(const Limits& l) {
  if (l.min && l.max)
    return std::string(" in ") + (l.min->open ? "(" : "[") + format_number(l.min->value) + ", " +
           format_number(l.max->value) + (l.max->open ? ")" : "]");
  if (l.min) return (l.min->open ? " > " : " >= ") + format_number(l.min->value);
  if (l.max) return (l.max->open ? " < " : " <= ") + format_number(l.max->value);
  return "";
}

}  // namespace

std::string describe(const Field& f) {
  const Limits& l = f.limits;
  std::string len = l.length ? std::to_string(l.length) + " " : "";
  std::string each = bounds_text(l).empty() ? "" : ", each" + bounds_text(l);
  std::string text;
  switch (f.default_value.index()) {
    case 0: text = "a boolean (true or false)"; break;
    case 1: text = "an integer" + bounds_text(l); break;
    case 2: text = "a finite number" + bounds_text(l); break;
    case 3: text = l.choices.empty() ? "a string" : "one of " + join(l.choices, ", "); break;
    case 4: text = "a list of " + len + "integers" + each; break;
    default: text = "a list of " + len + "finite numbers" + each; break;
  }
  return text + l.note;
}

namespace {

bool in_limits(double x, const Limits& l) {
  if (l.min && (l.min->open ? !(x > l.min->value) : !(x >= l.min->value))) return false;
  if (l.max && (l.max->open ? !(x < l.max->value) : !(x <= l.max->value))) return false;
  return true;
}

template <typename T>
std::optional<T> read_scalar(const toml::node& node, const Limits& l) {
  if constexpr (std::is_same_v<T, bool>) {
    if (auto b = node.as_boolean()) return b->get();
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    if (auto i = node.as_integer(); i && in_limits(static_cast<double>(i->get()), l)) return i->get();
  } else if constexpr (std::is_same_v<T, double>) {
    std::optional<double> x;
    if (auto f = node.as_floating_point()) x = f->get();
    if (auto i = node.as_integer()) x = static_cast<double>(i->get());
    if (x && std::isfinite(*x) && in_limits(*x, l)) return x;
  } else {
    auto s = node.as_string();
    if (s && (l.choices.empty() || std::count(l.choices.begin(), l.choices.end(), s->get())))
      return s->get();
  }
  return std::nullopt;
}

}  // namespace

Value read_value(const Context& ctx, const std::string& section, const Field& f,
                 const toml::node& node) {
  auto fail = [&] { ctx.fail(section, f.key, format_node(node), "expected " + describe(f)); };
  Value out = f.default_value;
  std::visit([&](auto& slot) {
    using T = std::decay_t<decltype(slot)>;
    if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<double>>) {
      const toml::array* arr = node.as_array();
      if (!arr || (f.limits.length && arr->size() != f.limits.length)) fail();
      T list;
      for (const toml::node& e : *arr) {
        auto x = read_scalar<typename T::value_type>(e, f.limits);
        if (!x) fail();
        list.push_back(*x);
      }
      slot = std::move(list);
    } else {
      auto x = read_scalar<T>(node, f.limits);
      if (!x) fail();
      slot = *x;
    }
  }, out);
  return out;
}

bool value_in_limits(const Value& v, const Limits& l) {
  return std::visit([&](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, bool>) return true;
    else if constexpr (std::is_same_v<T, std::string>)
      return l.choices.empty() || std::count(l.choices.begin(), l.choices.end(), x) > 0;
    else if constexpr (std::is_arithmetic_v<T>) return in_limits(static_cast<double>(x), l);
    else return std::all_of(x.begin(), x.end(), [&](auto e) { return in_limits(static_cast<double>(e), l); });
  }, v);
}

[[noreturn]] void unknown_key(const Context& ctx, const std::string& section, const std::string& key,
                              const toml::node& node, const std::vector<std::string>& allowed,
                              const std::string& scope) {
  auto s = closest(key, allowed);
  std::string hint = s ? "; did you mean " + section + "." + *s + "?" : ";";
  ctx.fail(section, key, format_node(node), "unknown key " + scope + hint + " allowed keys: " + join(allowed));
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}


}  // namespace eggroll::config_detail

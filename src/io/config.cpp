// Run configuration: TOML parsing with toml++, overrides, validation of every key, the kind
// registry for [model] and [task], and the resolved config written back as TOML.
#ifndef TOML_HEADER_ONLY
#define TOML_HEADER_ONLY 0  // link the shared libtomlplusplus, as its CMake target does
#define TOML_SHARED_LIB 1
#endif
#include "eggroll/io/config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "eggroll/core/error.hpp"

namespace eggroll {
namespace {

// Every value a key can hold: ConfigValue's alternatives (same order) plus lists of numbers.
using Value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                           std::vector<double>>;

struct Bound {
  double value;
  bool open = false;  // strict inequality
};
Bound ge(double v) { return {v, false}; }
Bound gt(double v) { return {v, true}; }
Bound le(double v) { return {v, false}; }
Bound lt(double v) { return {v, true}; }

struct Limits {
  std::optional<Bound> min = {};     // numbers, and each element of a list
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

// One key of a typed section: its field and how to read and write it in a Config.
struct Entry {
  Field field;
  std::function<Value(const Config&)> get;
  std::function<void(Config&, const Value&)> set;
};
struct SectionDef {
  std::string name;
  std::vector<Entry> entries;
};

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = {"run", "es", "optim", "dist", "model", "task"};
  return names;
}

// ---- formatting --------------------------------------------------------------------------

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
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

// A bound as people write it: 1 rather than 1.0.
std::string format_number(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e18)
    return std::to_string(static_cast<std::int64_t>(x));
  return format_double(x);
}

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

std::string bounds_text(const Limits& l) {
  if (l.min && l.max)
    return std::string(" in ") + (l.min->open ? "(" : "[") + format_number(l.min->value) + ", " +
           format_number(l.max->value) + (l.max->open ? ")" : "]");
  if (l.min) return (l.min->open ? " > " : " >= ") + format_number(l.min->value);
  if (l.max) return (l.max->open ? " < " : " <= ") + format_number(l.max->value);
  return "";
}

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

// Where a key came from, for messages: the file, or the override that set it.
struct Context {
  std::string source;
  std::map<std::string, std::string> overrides;  // "section.key" -> the override's text
  std::set<std::string> file_sections;           // sections present in the file itself

  std::string where(const std::string& section, const std::string& key) const {
    auto it = overrides.find(section + "." + key);
    return it == overrides.end() ? source : source + ": override '" + it->second + "'";
  }
  [[noreturn]] void fail(const std::string& section, const std::string& key,
                         const std::string& value, const std::string& what) const {
    throw_error(where(section, key), ": ", section, ".", key, " = ", value, ": ", what);
  }
};

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

// ---- the typed sections ------------------------------------------------------------------

template <typename M> Value to_value(const M& m) {
  if constexpr (std::is_same_v<M, bool>) return m;
  else if constexpr (std::is_integral_v<M>) return static_cast<std::int64_t>(m);
  else return m;
}
template <typename M> M from_value(const Value& v) {
  if constexpr (std::is_same_v<M, bool>) return std::get<bool>(v);
  else if constexpr (std::is_integral_v<M>) return static_cast<M>(std::get<std::int64_t>(v));
  else return std::get<M>(v);
}

template <typename S> struct SectionBuilder {
  SectionDef def;
  S Config::*section;

  template <typename M> SectionBuilder& add(const char* key, M S::*member, Limits limits = {}) {
    if constexpr (std::is_same_v<M, int>)
      if (!limits.max) limits.max = le(INT_MAX);
    auto sec = section;
    def.entries.push_back({Field{key, to_value(S{}.*member), std::move(limits)},
                           [sec, member](const Config& c) { return to_value((c.*sec).*member); },
                           [sec, member](Config& c, const Value& v) { (c.*sec).*member = from_value<M>(v); }});
    return *this;
  }
};

SectionDef run_section() {
  SectionBuilder<RunConfig> b{{"run", {}}, &Config::run};
  b.add("seed", &RunConfig::seed, {.min = ge(0)})
      .add("epochs", &RunConfig::epochs, {.min = ge(1)})
      .add("threads", &RunConfig::threads, {.min = ge(0), .note = " (0 = all hardware threads)"})
      .add("checkpoint_every", &RunConfig::checkpoint_every, {.min = ge(0)})
      .add("keep_checkpoints", &RunConfig::keep_checkpoints, {.min = ge(1)})
      .add("eval_every", &RunConfig::eval_every, {.min = ge(0)})
      .add("max_bad_epochs", &RunConfig::max_bad_epochs, {.min = ge(1)})
      .add("simd", &RunConfig::simd, {.choices = {"auto", "avx512", "avx2", "scalar"}});
  return b.def;
}

SectionDef es_section() {
  SectionBuilder<EsConfig> b{{"es", {}}, &Config::es};
  b.add("noiser", &EsConfig::noiser,
        {.choices = {"eggroll", "open_es", "eggroll_sign", "eggroll_baseline", "sparse", "noop", "q_eggroll"}})
      .add("population", &EsConfig::population, {.min = ge(1)})
      .add("rank", &EsConfig::rank, {.min = ge(1), .max = le(1024)})
      .add("sigma", &EsConfig::sigma, {.min = gt(0)})
      .add("noise_reuse", &EsConfig::noise_reuse, {.min = ge(0), .note = " (0 only with es.fixed_noise = true)"})
      .add("fixed_noise", &EsConfig::fixed_noise)
      .add("antithetic", &EsConfig::antithetic)
      .add("shaping", &EsConfig::shaping,
           {.choices = {"zscore", "group_zscore", "centered_rank", "antithetic_sign", "raw"}})
      .add("group_size", &EsConfig::group_size, {.min = ge(2)})
      .add("noise_source", &EsConfig::noise_source, {.choices = {"generator", "table"}})
      .add("table_log2_size", &EsConfig::table_log2_size, {.min = ge(20), .max = le(30)})
      .add("freeze_nonmatrix", &EsConfig::freeze_nonmatrix)
      .add("memory_budget", &EsConfig::memory_budget, {.min = ge(1 << 20), .note = " bytes (1 MiB)"})
      .add("sigma_shift", &EsConfig::sigma_shift, {.min = ge(0), .max = le(7)})
      .add("alpha", &EsConfig::alpha, {.min = ge(1), .max = le(30)})
      .add("alpha_decay_epochs", &EsConfig::alpha_decay_epochs, {.min = ge(1)});
  return b.def;
}

SectionDef optim_section() {
  const std::vector<std::string> schedules = {"constant", "linear", "cosine", "exponential"};
  SectionBuilder<OptimConfig> b{{"optim", {}}, &Config::optim};
  b.add("name", &OptimConfig::name, {.choices = {"sgd", "adam", "adamw"}})
      .add("lr", &OptimConfig::lr, {.min = ge(0)})
      .add("momentum", &OptimConfig::momentum, {.min = ge(0), .max = lt(1)})
      .add("nesterov", &OptimConfig::nesterov)
      .add("betas", &OptimConfig::betas, {.min = ge(0), .max = lt(1), .length = 2})
      .add("eps", &OptimConfig::eps, {.min = gt(0)})
      .add("weight_decay", &OptimConfig::weight_decay, {.min = ge(0)})
      .add("lr_schedule", &OptimConfig::lr_schedule, {.choices = schedules})
      .add("lr_end", &OptimConfig::lr_end, {.min = ge(0)})
      .add("sigma_schedule", &OptimConfig::sigma_schedule, {.choices = schedules})
      .add("sigma_end", &OptimConfig::sigma_end, {.min = ge(0)})
      .add("schedule_epochs", &OptimConfig::schedule_epochs, {.min = ge(0), .note = " (0 = run.epochs)"})
      .add("warmup_epochs", &OptimConfig::warmup_epochs, {.min = ge(0)})
      .add("clip_norm", &OptimConfig::clip_norm, {.min = ge(0), .note = " (0 = no clipping)"});
  return b.def;
}

SectionDef dist_section() {
  SectionBuilder<DistConfig> b{{"dist", {}}, &Config::dist};
  b.add("check_every", &DistConfig::check_every, {.min = ge(0), .note = " (0 = never)"});
  return b.def;
}

const std::vector<SectionDef>& typed_sections() {
  static const std::vector<SectionDef> sections = {run_section(), es_section(), optim_section(),
                                                   dist_section()};
  return sections;
}

std::vector<std::string> entry_keys(const SectionDef& s) {
  std::vector<std::string> keys;
  for (const auto& e : s.entries) keys.push_back(e.field.key);
  return keys;
}

void resolve_typed(const Context& ctx, const toml::table& doc, const SectionDef& s, Config& c) {
  const toml::table* t = doc.get_as<toml::table>(s.name);
  if (!t) return;
  for (auto&& [k, node] : *t) {
    std::string key(k.str());
    auto it = std::find_if(s.entries.begin(), s.entries.end(), [&](const Entry& e) { return e.field.key == key; });
    if (it == s.entries.end()) unknown_key(ctx, s.name, key, node, entry_keys(s), "in [" + s.name + "]");
    it->set(c, read_value(ctx, s.name, it->field, node));
  }
}

// Rules that tie keys of [es] together.
void check_es(const Context& ctx, const EsConfig& es) {
  bool pairs = es.antithetic && es.noiser != "noop";
  std::string pop = std::to_string(es.population), group = std::to_string(es.group_size);
  if (pairs && es.population % 2 != 0)
    ctx.fail("es", "population", pop, "population " + pop + " is odd but es.antithetic = true: " +
             "use an even population or set es.antithetic = false");
  if (pairs && es.group_size % 2 != 0)
    ctx.fail("es", "group_size", group, "group size " + group + " is odd but es.antithetic = true " +
             "(a group must hold whole antithetic pairs): use an even es.group_size or set es.antithetic = false");
  if (es.noise_reuse == 0 && !es.fixed_noise)
    ctx.fail("es", "noise_reuse", "0", "0 means one noise draw for the whole run and needs "
             "es.fixed_noise = true: set es.fixed_noise = true or use es.noise_reuse >= 1");
}

// ---- [model] and [task] ------------------------------------------------------------------

struct Registry {
  std::mutex mutex;
  std::map<std::string, KindSchema> schemas;  // "section/kind" -> schema
};
Registry& registry() {
  static Registry r;
  return r;
}

Value from_config_value(const ConfigValue& v) {
  return std::visit([](const auto& x) { return Value(x); }, v);
}
ConfigValue to_config_value(const Value& v) {
  return std::visit([](const auto& x) -> ConfigValue {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::vector<double>>)
      throw_error("internal: a list of numbers in a [model] or [task] table");
    else return x;
  }, v);
}

Field spec_field(const KeySpec& spec) {
  Limits l;
  if (spec.min) l.min = ge(*spec.min);
  if (spec.max) l.max = le(*spec.max);
  l.choices = spec.choices;
  return Field{spec.name, from_config_value(spec.default_value), l};
}

std::string kind_list(const std::string& section) {
  auto names = kind_names(section);
  return names.empty() ? "(none registered)" : join(names);
}

std::string read_kind(const Context& ctx, const toml::table& t, const std::string& section,
                      const std::string& default_kind) {
  const toml::node* k = t.get("kind");
  if (!k && !ctx.file_sections.count(section)) return default_kind;  // created by overrides
  if (!k)
    throw_error(ctx.source, ": [", section, "] has no key 'kind': add kind = \"<name>\" naming one of ",
                kind_list(section), " (or leave out [", section, "] for the default '", default_kind, "')");
  if (!k->is_string())
    ctx.fail(section, "kind", format_node(*k), "expected a string naming one of " + kind_list(section));
  return k->as_string()->get();
}

KindTable resolve_kind(const Context& ctx, const toml::table& doc, const std::string& section,
                       const std::string& default_kind) {
  const toml::table* t = doc.get_as<toml::table>(section);
  std::string kind = t ? read_kind(ctx, *t, section, default_kind) : default_kind;
  const KindSchema* schema = find_kind_schema(section, kind);
  if (!schema)
    ctx.fail(section, "kind", quote(kind), "unknown " + section + " kind; known kinds: " + kind_list(section));
  KindTable out{kind, {}};
  std::vector<std::string> allowed = {"kind"};
  for (const KeySpec& spec : schema->keys) {
    out.values[spec.name] = spec.default_value;
    allowed.push_back(spec.name);
  }
  if (!t) return out;
  for (auto&& [k, node] : *t) {
    std::string key(k.str());
    if (key == "kind") continue;
    auto it = std::find_if(schema->keys.begin(), schema->keys.end(), [&](const KeySpec& s) { return s.name == key; });
    if (it == schema->keys.end())
      unknown_key(ctx, section, key, node, allowed, "for " + section + " kind '" + kind + "'");
    out.values[key] = to_config_value(read_value(ctx, section, spec_field(*it), node));
  }
  return out;
}

// ---- whole documents ---------------------------------------------------------------------

toml::table parse_toml(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    throw_error(source, ":", pos.line, ":", pos.column, ": TOML syntax error: ", e.description());
  }
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

// "section.key=value": the value as TOML when it parses as one, else the bare text as a string.
void apply_override(Context& ctx, toml::table& doc, const std::string& text) {
  auto eq = text.find('=');
  std::string lhs = trim(std::string_view(text).substr(0, eq));
  auto dot = lhs.find('.');
  std::string section = trim(lhs.substr(0, dot == std::string::npos ? 0 : dot));
  std::string key = dot == std::string::npos ? "" : trim(lhs.substr(dot + 1));
  if (eq == std::string::npos || section.empty() || key.empty())
    throw_error("override '", text, "' is malformed: expected section.key=value, e.g. es.sigma=0.02 or optim.name=adam");
  if (!std::count(section_names().begin(), section_names().end(), section)) {
    auto s = closest(section, section_names());
    throw_error("override '", text, "': unknown section [", section, "]",
                s ? "; did you mean [" + *s + "]?" : ";", " allowed sections: ", join(section_names()));
  }
  toml::table value;
  try {
    value = toml::parse("v = " + text.substr(eq + 1));
  } catch (const toml::parse_error&) {
  }
  if (value.size() != 1 || !value.get("v")) {
    value.clear();
    value.insert("v", trim(std::string_view(text).substr(eq + 1)));
  }
  if (!doc.get(section)) doc.insert(section, toml::table{});
  toml::table* t = doc.get_as<toml::table>(section);
  if (!t) throw_error(ctx.source, ": ", section, " is not a table, so override '", text, "' cannot apply");
  t->insert_or_assign(key, *value.get("v"));
  ctx.overrides[section + "." + key] = text;
}

// Top level: only the known sections, each a table.
void check_top_level(const Context& ctx, const toml::table& doc) {
  for (auto&& [k, node] : doc) {
    std::string name(k.str());
    bool known = std::count(section_names().begin(), section_names().end(), name) > 0;
    if (known && node.is_table()) continue;
    std::string what;
    if (known) {
      what = name + " must be a table: write a [" + name + "] header followed by key = value lines";
    } else if (node.is_table()) {
      auto s = closest(name, section_names());
      what = "unknown section [" + name + "]" + (s ? "; did you mean [" + *s + "]?" : ";");
    } else {
      what = "keys must be inside a section";
      for (const SectionDef& s : typed_sections())
        for (const Entry& e : s.entries)
          if (e.field.key == name) what += "; did you mean " + s.name + "." + name + "?";
    }
    throw_error(ctx.source, ": ", name, " = ", format_node(node), ": ", what,
                " allowed sections: ", join(section_names()));
  }
}

struct SectionValues {
  std::string name;
  std::vector<std::pair<std::string, Value>> items;
};

SectionValues kind_values(const std::string& section, const KindTable& t) {
  SectionValues out{section, {{"kind", Value(t.kind)}}};
  std::set<std::string> done;
  if (const KindSchema* schema = find_kind_schema(section, t.kind))
    for (const KeySpec& spec : schema->keys)
      if (auto it = t.values.find(spec.name); it != t.values.end()) {
        out.items.emplace_back(spec.name, from_config_value(it->second));
        done.insert(spec.name);
      }
  for (const auto& [key, v] : t.values)
    if (!done.count(key)) out.items.emplace_back(key, from_config_value(v));
  return out;
}

// Every key of every section, in the order of the structs and schemas.
std::vector<SectionValues> config_values(const Config& c) {
  std::vector<SectionValues> out;
  for (const SectionDef& s : typed_sections()) {
    SectionValues sv{s.name, {}};
    for (const Entry& e : s.entries) sv.items.emplace_back(e.field.key, e.get(c));
    out.push_back(std::move(sv));
  }
  out.push_back(kind_values("model", c.model));
  out.push_back(kind_values("task", c.task));
  return out;
}

// ---- KindTable lookups -------------------------------------------------------------------

const char* type_name(const ConfigValue& v) {
  static const char* names[] = {"a boolean", "an integer", "a number", "a string", "a list of integers"};
  return names[v.index()];
}

const ConfigValue& lookup(const KindTable& t, const std::string& key) {
  auto it = t.values.find(key);
  if (it == t.values.end()) {
    std::vector<std::string> keys;
    for (const auto& kv : t.values) keys.push_back(kv.first);
    throw_error("kind '", t.kind, "' has no key '", key, "' (its keys: ", join(keys), ")");
  }
  return it->second;
}

template <typename T> const T& lookup_as(const KindTable& t, const std::string& key, const char* wanted) {
  const ConfigValue& v = lookup(t, key);
  if (auto p = std::get_if<T>(&v)) return *p;
  throw_error("key '", key, "' of kind '", t.kind, "' holds ", type_name(v), ", not ", wanted);
}

}  // namespace

bool KindTable::get_bool(const std::string& key) const { return lookup_as<bool>(*this, key, "a boolean"); }
std::int64_t KindTable::get_int(const std::string& key) const {
  return lookup_as<std::int64_t>(*this, key, "an integer");
}
double KindTable::get_double(const std::string& key) const {
  if (auto p = std::get_if<std::int64_t>(&lookup(*this, key))) return static_cast<double>(*p);
  return lookup_as<double>(*this, key, "a number");
}
const std::string& KindTable::get_string(const std::string& key) const {
  return lookup_as<std::string>(*this, key, "a string");
}
const std::vector<std::int64_t>& KindTable::get_ints(const std::string& key) const {
  return lookup_as<std::vector<std::int64_t>>(*this, key, "a list of integers");
}

void register_kind_schema(KindSchema schema) {
  check(schema.section == "model" || schema.section == "task", "register_kind_schema: section '",
        schema.section, "' of kind '", schema.kind, "' must be \"model\" or \"task\"");
  check(!schema.kind.empty(), "register_kind_schema: empty kind name in [", schema.section, "]");
  std::set<std::string> seen;
  for (const KeySpec& spec : schema.keys) {
    std::string where = "register_kind_schema: " + schema.section + " kind '" + schema.kind + "' key '" + spec.name + "'";
    check(!spec.name.empty() && spec.name != "kind", where, ": names must be non-empty and not 'kind'");
    check(seen.insert(spec.name).second, where, " is declared twice");
    Field f = spec_field(spec);
    check(value_in_limits(f.default_value, f.limits), where, ": default ", format_value(f.default_value),
          " is not ", describe(f));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.schemas[schema.section + "/" + schema.kind] = std::move(schema);
}

const KindSchema* find_kind_schema(const std::string& section, const std::string& kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.schemas.find(section + "/" + kind);
  return it == r.schemas.end() ? nullptr : &it->second;
}

std::vector<std::string> kind_names(const std::string& section) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [id, schema] : r.schemas)
    if (schema.section == section) names.push_back(schema.kind);
  return names;
}

Config parse_config(const std::string& toml_text, const std::string& source,
                    const std::vector<std::string>& overrides) {
  Context ctx{source, {}, {}};
  toml::table doc = parse_toml(toml_text, source);
  for (auto&& [k, node] : doc) ctx.file_sections.insert(std::string(k.str()));
  check_top_level(ctx, doc);
  for (const std::string& o : overrides) apply_override(ctx, doc, o);
  Config config;
  for (const SectionDef& s : typed_sections()) resolve_typed(ctx, doc, s, config);
  check_es(ctx, config.es);
  config.model = resolve_kind(ctx, doc, "model", "mlp");
  config.task = resolve_kind(ctx, doc, "task", "regression");
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw_error("config file '", path, "' not found: give the path of an existing .toml file ",
                "(examples are in configs/), or run `eggroll train` without a config for the built-in default");
  if (!std::filesystem::is_regular_file(path, ec))
    throw_error("config file '", path, "' is not a regular file: give the path of a .toml file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) throw_error("cannot read config file '", path, "': ", std::strerror(errno));
  return parse_config(text.str(), path, overrides);
}

std::string config_to_toml(const Config& config) {
  std::string out;
  for (const SectionValues& s : config_values(config)) {
    out += (out.empty() ? "[" : "\n[") + s.name + "]\n";
    for (const auto& [key, v] : s.items) out += format_key(key) + " = " + format_value(v) + "\n";
  }
  return out;
}

std::vector<std::string> config_diff(const Config& a, const Config& b) {
  std::vector<std::pair<std::string, std::string>> ka, kb;
  for (auto* side : {&ka, &kb})
    for (const SectionValues& s : config_values(side == &ka ? a : b))
      for (const auto& [key, v] : s.items) side->emplace_back(s.name + "." + key, format_value(v));
  std::map<std::string, std::string> mb(kb.begin(), kb.end());
  std::vector<std::string> diff;
  std::set<std::string> seen;
  for (const auto& [key, text] : ka) {
    seen.insert(key);
    auto it = mb.find(key);
    if (it == mb.end() || it->second != text) diff.push_back(key);
  }
  for (const auto& [key, text] : kb)
    if (!seen.count(key)) diff.push_back(key);
  return diff;
}

}  // namespace eggroll

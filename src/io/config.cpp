// Run configuration: TOML parsing with toml++, overrides, validation of every key, the kind
// registry for [model] and [task], and the resolved config written back as TOML.
#include "eggroll/io/config.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "config_values.hpp"
#include "eggroll/core/error.hpp"

namespace eggroll {
namespace {
using namespace config_detail;

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
      .add("simd", &RunConfig::simd, {.choices = {"auto", "avx512_amx", "avx512", "avx2", "scalar"}});
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
      what = name + " must be a table: write a [" + name + "] header followed by key = value lines;";
    } else if (node.is_table()) {
      auto s = closest(name, section_names());
      what = "unknown section [" + name + "]" + (s ? "; did you mean [" + *s + "]?" : ";");
    } else {
      std::string hint = ";";
      for (const SectionDef& s : typed_sections())
        for (const Entry& e : s.entries)
          if (e.field.key == name) hint = "; did you mean " + s.name + "." + name + "?";
      what = "keys must be inside a section" + hint;
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

// eggroll sample: text from a language-model checkpoint.
#include <cstdio>
#include <vector>

#include "commands.hpp"
#include "eggroll/backend/backend.hpp"
#include "eggroll/io/safetensors.hpp"
#include "eggroll/model/egg.hpp"

namespace eggroll::cli {

int sample(const SampleArgs& args) {
  Checkpoint ck = read_safetensors(args.checkpoint);
  auto it = ck.metadata.find("config");
  check(it != ck.metadata.end(), "checkpoint '", args.checkpoint, "' has no 'config' metadata: it was not written by eggroll");
  Config cfg = load_run_config_text(it->second, args.checkpoint + " (metadata config)");
  check(cfg.model.kind == "egg", "sample needs a language-model checkpoint (model.kind = \"egg\"), '", args.checkpoint,
        "' holds model.kind = \"", cfg.model.kind, "\"");
  auto model = make_model(cfg.model, 256, 256, cfg.run.seed);
  for (Param& p : model->params().all()) {
    auto t = ck.tensors.find(p.name);
    check(t != ck.tensors.end() && t->second.shape() == p.value.shape() && t->second.dtype() == p.value.dtype(),
          "checkpoint '", args.checkpoint, "' lacks a matching tensor '", p.name, "' ", shape_string(p.value.shape()));
    p.value = t->second;
  }
  auto backend = make_backend(BackendKind::cpu);
  const std::string text = egg_sample(dynamic_cast<EggModel&>(*model), *backend, args.prompt, args.bytes,
                                      args.temperature, args.seed);
  std::printf("%s%s\n", args.prompt.c_str(), text.c_str());
  if (!args.json.empty())  // "text" with any non-UTF-8 byte as U+FFFD; "bytes" has every byte as it is
    write_json(args.json, {{"prompt", args.prompt},
                           {"text", text},
                           {"bytes", std::vector<unsigned>(text.begin(), text.end())}});
  return 0;
}

}  // namespace eggroll::cli
